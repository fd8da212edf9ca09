"""A run on an accepted export starts from its launch record, without loading torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import photo

from splitaudit.indexer.embed.backends import launch as launch_module
from splitaudit.indexer.embed.backends import load_embedder_on_backend
from splitaudit.indexer.embed.backends.cache import META_FILE
from splitaudit.indexer.embed.backends.exported import ExportedEmbedder
from splitaudit.indexer.embed.backends.launch import LAUNCH_DIR, launch_id
from splitaudit.indexer.embed.backends.runners import default_threads
from splitaudit.indexer.embed.device import _no_gpu_devices

ROOT = Path(__file__).resolve().parents[3]
EXPORTED = ["onnxruntime", "openvino"]
SPEC = "efficientnet-lite0"


def _records(cache: Path, backend: str) -> list[Path]:
    return sorted((cache / LAUNCH_DIR / backend).glob("*.json"))


def _forbid_torch_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded through torch")

    monkeypatch.setattr("splitaudit.indexer.embed.loader.load_embedder", refuse)


@pytest.mark.parametrize("backend", EXPORTED)
def test_the_second_run_starts_from_the_launch_record_with_the_same_vectors(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "exports"
    first = load_embedder_on_backend(SPEC, backend=backend, cache_dir=cache)
    assert isinstance(first, ExportedEmbedder)
    (record,) = _records(cache, backend)
    saved = json.loads(record.read_text())
    assert saved["key"] == first.export_key and saved["model_id"] == first.model_id
    _forbid_torch_loading(monkeypatch)
    second = load_embedder_on_backend(SPEC, backend=backend, cache_dir=cache)
    assert isinstance(second, ExportedEmbedder)
    assert (second.model_id, second.dim, second.backend, second.export_key) == (
        first.model_id,
        first.dim,
        backend,
        first.export_key,
    )
    assert second.agreement == first.agreement
    images = [photo(seed, (200 + 37 * seed, 150 + 11 * seed)) for seed in range(9)]
    images.append(photo(9).convert("L"))
    assert np.array_equal(second.embed(images), first.embed(images))


def test_a_started_run_imports_neither_torch_nor_torchvision(tmp_path: Path) -> None:
    cache = tmp_path / "exports"
    load_embedder_on_backend(SPEC, backend="openvino", cache_dir=cache)
    script = textwrap.dedent(
        f"""
        import sys
        from splitaudit.indexer.embed.backends import load_embedder_on_backend
        from conftest import photo
        e = load_embedder_on_backend({SPEC!r}, backend="openvino", cache_dir={str(cache)!r})
        vector = e.embed([photo(1)])
        print(type(e).__name__, vector.shape, [m for m in ("torch", "torchvision", "open_clip") if m in sys.modules])
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "ExportedEmbedder (1, 1280) []", done.stderr


def test_an_unreadable_record_loads_through_torch_and_is_written_again(tmp_path: Path) -> None:
    cache = tmp_path / "exports"
    load_embedder_on_backend(SPEC, backend="onnxruntime", cache_dir=cache)
    (record,) = _records(cache, "onnxruntime")
    good = record.read_text()
    record.write_text("{not json")
    again = load_embedder_on_backend(SPEC, backend="onnxruntime", cache_dir=cache)
    assert isinstance(again, ExportedEmbedder)
    assert json.loads(record.read_text()) == json.loads(good)


def test_a_record_whose_export_is_damaged_loads_through_torch_and_rebuilds_it(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "exports"
    first = load_embedder_on_backend(SPEC, backend="onnxruntime", cache_dir=cache)
    assert isinstance(first, ExportedEmbedder)
    entry = cache / "onnxruntime" / first.export_key
    model = max((p for p in entry.iterdir() if p.name != META_FILE), key=lambda p: p.stat().st_size)
    model.write_bytes(b"not a model")
    again = load_embedder_on_backend(SPEC, backend="onnxruntime", cache_dir=cache)
    assert isinstance(again, ExportedEmbedder) and again.export_key == first.export_key
    meta = json.loads((entry / META_FILE).read_text())
    assert meta["status"] == "accepted" and model.stat().st_size > 1000


def test_the_record_id_follows_the_spec_backend_and_library_versions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundled = launch_id(SPEC, "openvino")
    assert bundled is not None and bundled == launch_id("efficientnet_lite0", "openvino")
    assert launch_id(SPEC, "onnxruntime") not in (None, bundled)
    registry = launch_id("ViT-B-32:laion2b_s34b_b79k", "openvino")
    assert registry not in (None, bundled)
    assert launch_id("ViT-B-32:laion2b-s34b-b79k", "openvino") == registry  # canonical tag
    # checkpoint files and directories always load through torch
    assert launch_id(f"ViT-B-32:{tmp_path / 'w.pt'}", "openvino") is None
    assert launch_id(f"local-dir:{tmp_path}", "openvino") is None
    assert launch_id(SPEC, "torch") is None
    real = launch_module._version
    monkeypatch.setattr(
        launch_module, "_version", lambda name: "9.9" if name == "openvino" else real(name)
    )
    assert launch_id(SPEC, "openvino") != bundled


def test_default_threads_follow_omp_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    import torch

    assert default_threads() == torch.get_num_threads()  # torch's default: physical cores


@pytest.mark.skipif(not _no_gpu_devices(), reason="this machine has GPU device nodes")
def test_auto_device_resolves_to_cpu_without_importing_torch() -> None:
    script = (
        "import sys; from splitaudit.indexer.embed.device import resolve_device; "
        "print(resolve_device('auto').device, 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["cpu", "False"]
