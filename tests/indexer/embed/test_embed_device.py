"""``--device``: auto picks CUDA, then MPS, then CPU; an absent device is a usage error naming what exists."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import photo
from helpers.tiny_model import build_tiny_checkpoint

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.embed.device import (
    TorchProbe,
    available_devices,
    cpu_embed_batch,
    resolve_device,
)
from splitaudit.indexer.errors import UsageError


@dataclass
class FakeProbe:
    """A machine with ``gpus`` CUDA devices and, optionally, Apple's MPS."""

    gpus: int = 0
    mps: bool = False

    def cuda_count(self) -> int:
        return self.gpus

    def cuda_name(self, index: int) -> str:
        return f"Fake GPU {index}"

    def mps_available(self) -> bool:
        return self.mps


@pytest.mark.parametrize(
    ("probe", "device", "kind", "embed_batch"),
    [
        (FakeProbe(), "cpu", "cpu", cpu_embed_batch()),
        (FakeProbe(mps=True), "mps", "mps", 64),
        (FakeProbe(gpus=2, mps=True), "cuda:0", "cuda", 256),
    ],
)
def test_auto_prefers_cuda_then_mps_then_cpu(
    probe: FakeProbe, device: str, kind: str, embed_batch: int
) -> None:
    resolved = resolve_device("auto", probe)
    assert (resolved.device, resolved.kind, resolved.embed_batch) == (device, kind, embed_batch)
    assert resolved.summary().endswith("chosen by auto")
    assert resolved.pipeline_batch >= resolved.embed_batch


def test_named_devices_on_a_machine_with_two_gpus() -> None:
    probe = FakeProbe(gpus=2)
    assert available_devices(probe) == ["cuda:0", "cuda:1", "cpu"]
    assert resolve_device("cuda", probe).device == "cuda:0"
    one = resolve_device("CUDA:1", probe)
    assert one.device == "cuda:1" and one.summary() == "device cuda:1 (Fake GPU 1), requested"
    assert resolve_device("cpu", probe).device == "cpu"
    with pytest.raises(
        UsageError,
        match=r"'cuda:2' is not available on this machine; available: cuda:0, cuda:1, cpu",
    ):
        resolve_device("cuda:2", probe)
    with pytest.raises(UsageError, match=r"available: cuda:0, cuda:1, cpu"):
        resolve_device("mps", probe)


@pytest.mark.parametrize("bad", ["tpu", "mps:1", "cpu:0", "cuda:-1", "", "cuda:x"])
def test_unknown_device_names_are_refused(bad: str) -> None:
    with pytest.raises(
        UsageError, match=r"unknown device .* use one of auto, cpu, cuda, cuda:N, mps"
    ):
        resolve_device(bad, FakeProbe(gpus=1))


def test_torch_probe_follows_torch_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("splitaudit.indexer.embed.device._no_gpu_devices", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        UsageError, match=r"'cuda' is not available on this machine; available: .*cpu.*no CUDA GPU"
    ):
        resolve_device("cuda", TorchProbe())
    assert resolve_device("auto", TorchProbe()).device in ("cpu", "mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "Faked H200")
    picked = resolve_device("auto", TorchProbe())
    assert (
        picked.device == "cuda:0"
        and picked.description == "cuda:0 (Faked H200)"
        and picked.embed_batch == 256
    )
    # a Linux machine without GPU device nodes: torch is not even asked
    monkeypatch.setattr("splitaudit.indexer.embed.device._no_gpu_devices", lambda: True)
    assert TorchProbe().cuda_count() == 0


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for seed in range(3):
        photo(seed, (64, 48)).save(folder / f"img{seed}.png")
    return folder


def test_index_on_an_absent_device_exits_2_naming_the_available_ones(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    home = tmp_path / "home"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["index", str(corpus), "--corpus", "c", "--home", str(home), "--model", spec],
        env={"SPLITAUDIT_DEVICE": "cuda:1"},
    )
    assert result.exit_code == 2, result.output
    assert (
        "'cuda:1' is not available on this machine; available: " in result.output
        and "cpu" in result.output
    )
    assert not home.exists()  # refused before anything was written
    for command in (
        ["audit", str(corpus), "--corpus", "c", "--home", str(home), "--device", "cuda"],
        ["worker", "--home", str(home), "--device", "cuda"],
        ["serve", "--home", str(home), "--device", "cuda", "--port", "0"],
    ):
        refused = runner.invoke(cli, command)
        assert refused.exit_code == 2 and "is not available on this machine" in refused.output, (
            refused.output
        )


def test_index_and_audit_on_cpu_say_which_device_embedded(tmp_path: Path, corpus: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    home, summary = tmp_path / "home", tmp_path / "summary.json"
    runner = CliRunner()
    indexed = runner.invoke(
        cli,
        [
            "index",
            str(corpus),
            "--corpus",
            "c",
            "--home",
            str(home),
            "--model",
            spec,
            "--device",
            "cpu",
            "--json",
            str(summary),
            "--quiet",
        ],
    )
    assert indexed.exit_code == 0, indexed.output
    assert f"embedded on device cpu, requested, batches of {cpu_embed_batch()}" in indexed.output
    assert json.loads(summary.read_text())["device"] == "cpu"
    audited = runner.invoke(
        cli,
        ["audit", str(corpus), "--corpus", "c", "--home", str(home), "--quiet"],
        env={"SPLITAUDIT_DEVICE": "cpu"},
    )
    assert audited.exit_code == 1, (
        audited.output
    )  # the split is the corpus: every image is an exact copy
    assert "Embedded on device cpu, requested." in audited.output


@pytest.mark.parametrize(("threads", "batch"), [(1, 8), (2, 8), (4, 16), (16, 64), (64, 64)])
def test_cpu_forward_batch_follows_the_threads(threads: int, batch: int) -> None:
    # a few images per inference stream: bigger machines get bigger batches, never past 64
    assert cpu_embed_batch(threads) == batch


def test_cpu_forward_batch_reads_the_thread_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "6")
    assert cpu_embed_batch() == 24
    assert resolve_device("cpu", FakeProbe()).embed_batch == 24
