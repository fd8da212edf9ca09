"""Inference backends: selection, the export cache, the agreement check, agreement with eager torch."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import photo

from splitaudit.indexer.embed.backends import (
    AUTO_PREFERENCE,
    backend_embedder_factory,
    installed_backends,
    load_embedder_on_backend,
    resolve_backend,
)
from splitaudit.indexer.embed.backends.cache import META_FILE
from splitaudit.indexer.embed.backends.exported import (
    ExportedEmbedder,
    accelerate,
    held_out_images,
    min_cosine,
)
from splitaudit.indexer.embed.backends.openvino import COMPILED_CACHE
from splitaudit.indexer.embed.embedder import OpenClipEmbedder
from splitaudit.indexer.embed.loader import load_embedder
from splitaudit.indexer.errors import UsageError

EXPORTED = ["onnxruntime", "openvino"]


def _entries(cache: Path, backend: str) -> list[Path]:
    folder = cache / backend
    return (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    )


def test_auto_picks_the_fastest_installed_backend_on_cpu_and_torch_elsewhere() -> None:
    assert installed_backends() == list(AUTO_PREFERENCE)  # all three ship in the test venv
    assert resolve_backend("auto", "cpu") == AUTO_PREFERENCE[0] == "openvino"
    assert resolve_backend("auto", "cuda:0") == "torch"
    assert resolve_backend("onnxruntime", "cuda") == "torch"  # exports are CPU builds
    assert resolve_backend("torch") == "torch"


def test_auto_skips_a_backend_that_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # what an absent package looks like
    assert installed_backends() == ["onnxruntime", "torch"]
    assert resolve_backend("auto") == "onnxruntime"


def test_an_unavailable_backend_is_a_usage_error_naming_the_installed_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(UsageError, match=r"not installed here \(installed: onnxruntime, torch\)"):
        resolve_backend("openvino")
    with pytest.raises(UsageError, match="installed: onnxruntime, torch"):
        backend_embedder_factory("openvino", tmp_path)
    with pytest.raises(UsageError, match="unknown backend 'tensorrt'"):
        resolve_backend("tensorrt")


@pytest.mark.parametrize("backend", EXPORTED)
def test_exported_model_agrees_with_eager_torch_and_keeps_the_model_id(
    backend: str, tiny_model_spec: str, tmp_path: Path
) -> None:
    eager = load_embedder(tiny_model_spec)
    fast = load_embedder_on_backend(
        tiny_model_spec, backend=backend, cache_dir=tmp_path / "exports"
    )
    assert isinstance(fast, ExportedEmbedder) and fast.backend == backend
    assert fast.model_id == eager.model_id and fast.dim == eager.dim
    images = [photo(seed, (200 + 7 * seed, 150)) for seed in range(11)]  # not the held-out batch
    got, want = fast.embed(images), eager.embed(images)
    assert got.shape == (11, eager.dim) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert min_cosine(got, want) >= 0.999
    assert fast.embed([]).shape == (0, eager.dim)


@pytest.mark.slow
@pytest.mark.parametrize("backend", EXPORTED)
def test_efficientnet_lite0_runs_on_each_backend(backend: str, tmp_path: Path) -> None:
    fast = load_embedder_on_backend("efficientnet-lite0", backend=backend, cache_dir=tmp_path)
    assert isinstance(fast, ExportedEmbedder) and fast.agreement >= 0.999
    images = [photo(seed) for seed in range(3)]
    assert (
        min_cosine(fast.embed(images), load_embedder("efficientnet-lite0").embed(images)) >= 0.999
    )


def test_the_second_run_reuses_the_export(
    tiny_model_spec: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "exports"
    load_embedder_on_backend(tiny_model_spec, backend="onnxruntime", cache_dir=cache)
    (entry,) = _entries(cache, "onnxruntime")
    meta = json.loads((entry / META_FILE).read_text())
    assert meta["status"] == "accepted" and meta["min_cosine"] >= 0.999
    assert set(meta["versions"]) == {"torch", "onnx", "onnxruntime"}
    stamp = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in entry.iterdir()}
    with caplog.at_level(logging.WARNING):
        again = load_embedder_on_backend(tiny_model_spec, backend="onnxruntime", cache_dir=cache)
    assert isinstance(again, ExportedEmbedder)
    assert _entries(cache, "onnxruntime") == [entry]
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in entry.iterdir()} == stamp
    assert not caplog.records  # nothing rebuilt, nothing refused
    assert not list((cache / "onnxruntime").glob(".*"))  # no temporary folders left behind


def test_openvino_reuses_its_compiled_model_and_survives_a_damaged_blob(
    tiny_model_spec: str, tmp_path: Path
) -> None:
    cache = tmp_path / "exports"
    first = load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=cache)
    (entry,) = _entries(cache, "openvino")
    blobs = sorted((entry / COMPILED_CACHE).glob("*.blob"))
    assert blobs, "the compiled model is cached beside the export"
    images = [photo(3), photo(4)]
    want = first.embed(images)
    stamp = {p.name: p.stat().st_mtime_ns for p in blobs}
    again = load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=cache)
    np.testing.assert_array_equal(again.embed(images), want)  # the imported blob, same numbers
    assert {p.name: p.stat().st_mtime_ns for p in blobs} == stamp  # read, not rebuilt
    for blob in blobs:  # half written by a process that was killed
        blob.write_bytes(blob.read_bytes()[: blob.stat().st_size // 3])
    damaged = load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=cache)
    np.testing.assert_array_equal(damaged.embed(images), want)
    assert META_FILE in {p.name for p in entry.iterdir()}  # the export itself is kept


@pytest.mark.parametrize("backend", EXPORTED)
def test_a_corrupt_cache_file_is_rebuilt(
    backend: str, tiny_model_spec: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "exports"
    first = load_embedder_on_backend(tiny_model_spec, backend=backend, cache_dir=cache)
    (entry,) = _entries(cache, backend)
    files = (p for p in entry.iterdir() if p.is_file() and p.name != META_FILE)
    model = max(files, key=lambda p: p.stat().st_size)
    # truncated (a new file renamed over it: the running model may have the old one memory-mapped)
    damaged = model.with_suffix(".damaged")
    damaged.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    damaged.replace(model)
    with caplog.at_level(logging.WARNING):
        rebuilt = load_embedder_on_backend(tiny_model_spec, backend=backend, cache_dir=cache)
    assert "damaged" in caplog.text and "does not match its recorded SHA-256" in caplog.text
    assert isinstance(rebuilt, ExportedEmbedder)
    images = [photo(5)]
    np.testing.assert_allclose(rebuilt.embed(images), first.embed(images), atol=1e-5)
    assert json.loads((entry / META_FILE).read_text())["status"] == "accepted"


def test_a_cache_entry_without_metadata_is_rebuilt(tiny_model_spec: str, tmp_path: Path) -> None:
    cache = tmp_path / "exports"
    load_embedder_on_backend(tiny_model_spec, backend="onnxruntime", cache_dir=cache)
    (entry,) = _entries(cache, "onnxruntime")
    (entry / META_FILE).write_text("{not json")
    again = load_embedder_on_backend(tiny_model_spec, backend="onnxruntime", cache_dir=cache)
    assert isinstance(again, ExportedEmbedder)
    assert json.loads((entry / META_FILE).read_text())["status"] == "accepted"


class _TracesWrong(torch.nn.Module):
    """A tower whose forward branches on the pixel values: the tracer freezes the blank-input branch."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blank = torch.nn.Linear(3, 8)
        self.photo = torch.nn.Linear(3, 8)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        pooled = pixels.mean(dim=(2, 3))
        if bool(pixels.abs().sum() == 0):
            return self.blank(pooled)
        return self.photo(pooled)


def _traces_wrong_embedder() -> OpenClipEmbedder:
    from torchvision import transforms

    preprocess = transforms.Compose(
        [
            transforms.Resize(32),
            transforms.CenterCrop(32),
            transforms.ToTensor(),
            transforms.Normalize([0.5] * 3, [0.25] * 3),
        ]
    )
    return OpenClipEmbedder(_TracesWrong().eval(), preprocess, model_id="test:traces-wrong", dim=8)


@pytest.mark.parametrize("backend", EXPORTED)
def test_an_export_that_disagrees_is_refused_and_torch_is_used(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    eager = _traces_wrong_embedder()
    with caplog.at_level(logging.WARNING):
        used = accelerate(eager, backend, cache_dir=tmp_path)
    assert used is eager  # eager torch, not the export
    assert "refused" in caplog.text and "disagrees with eager torch" in caplog.text
    assert f"over {len(held_out_images())} held-out images" in caplog.text
    (entry,) = _entries(tmp_path, backend)
    meta = json.loads((entry / META_FILE).read_text())
    assert meta["status"] == "refused" and meta["min_cosine"] < 0.999
    assert sorted(p.name for p in entry.iterdir()) == [META_FILE]  # the wrong model is not kept
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert accelerate(eager, backend, cache_dir=tmp_path) is eager  # refusal remembered
    assert "disagrees with eager torch" in caplog.text
    assert _entries(tmp_path, backend) == [entry]


def test_a_tower_that_cannot_be_exported_falls_back_to_torch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    eager = _traces_wrong_embedder()
    plain = OpenClipEmbedder(
        lambda batch: eager.encode_image(batch),
        eager.preprocess.transform,
        model_id="test:lambda",
        dim=8,
    )
    with caplog.at_level(logging.WARNING):
        assert accelerate(plain, "onnxruntime", cache_dir=tmp_path) is plain
    assert "cannot be exported" in caplog.text
