"""Export recipes (the class-token-only ViT tail, in the cache key) and OpenVINO streams."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch
from conftest import photo
from helpers.tiny_model import TINY_MODEL_CFG

from splitaudit.indexer.embed.backends import load_embedder_on_backend
from splitaudit.indexer.embed.backends.cache import META_FILE, cache_key
from splitaudit.indexer.embed.backends.cls_tower import RECIPE, ClsOnlyLastBlock, cls_only_tower
from splitaudit.indexer.embed.backends.exported import WHOLE_RECIPE, ExportedEmbedder, export_tower
from splitaudit.indexer.embed.backends.openvino import (
    COMPILED_CACHE,
    MODEL_FILE,
    REQUEST_BATCH,
    OpenVinoRunner,
    open_runner,
    stream_count,
)
from splitaudit.indexer.embed.loader import load_embedder


def _tiny_clip(**vision: object) -> open_clip.CLIP:
    torch.manual_seed(0)
    cfg = json.loads(json.dumps(TINY_MODEL_CFG))
    cfg["vision_cfg"].update(vision)
    return open_clip.CLIP(**cfg).eval()


def _pixels(n: int = 3) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(n, 3, 64, 64)


def test_the_class_token_tail_computes_what_the_whole_tower_does() -> None:
    model = _tiny_clip()
    tower = cls_only_tower(model.encode_image)
    assert isinstance(tower, ClsOnlyLastBlock)
    with torch.inference_mode():
        torch.testing.assert_close(tower(_pixels()), model.encode_image(_pixels()))


def test_towers_whose_output_reads_other_tokens_are_exported_whole() -> None:
    averaged = _tiny_clip(pool_type="avg")
    assert cls_only_tower(averaged.encode_image) is None
    assert export_tower(averaged.encode_image)[1] == WHOLE_RECIPE
    assert cls_only_tower(lambda pixels: pixels) is None  # not a module's method
    linear = torch.nn.Linear(3, 4)
    assert cls_only_tower(linear.forward) is None
    assert export_tower(linear)[1] == WHOLE_RECIPE
    assert export_tower(_tiny_clip().encode_image)[1] == RECIPE


def test_the_recipe_is_part_of_the_cache_key() -> None:
    args = ("m", "openvino", {"torch": "2"}, (3, 64, 64))
    assert cache_key(*args, recipe=RECIPE) != cache_key(*args, recipe=WHOLE_RECIPE)
    assert cache_key(*args) == cache_key(*args, recipe=WHOLE_RECIPE)


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_a_tiny_vit_is_exported_with_the_class_token_tail(
    backend: str, tiny_model_spec: str, tmp_path: Path
) -> None:
    fast = load_embedder_on_backend(tiny_model_spec, backend=backend, cache_dir=tmp_path)
    assert isinstance(fast, ExportedEmbedder) and fast.agreement >= 0.999
    (entry,) = (p for p in (tmp_path / backend).iterdir() if not p.name.startswith("."))
    assert json.loads((entry / META_FILE).read_text())["recipe"] == RECIPE
    images = [photo(seed, (90, 70)) for seed in range(5)]
    got, want = fast.embed(images), load_embedder(tiny_model_spec).embed(images)
    assert float(np.min(np.sum(got * want, axis=1))) >= 0.999


@pytest.mark.parametrize(
    ("threads", "batch_size", "streams"),
    [(1, 32, 1), (2, 32, 2), (16, 32, 8), (2, 8, 2), (2, 4, 1), (2, 1, 1), (4, 16, 4)],
)
def test_openvino_gives_each_stream_at_least_four_images(
    threads: int, batch_size: int, streams: int
) -> None:
    assert stream_count(threads, batch_size) == streams


def test_stream_count_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        stream_count(0, 32)
    with pytest.raises(ValueError, match="streams must be >= 1"):
        OpenVinoRunner(Path("unused"), threads=1, streams=0)
    with pytest.raises(ValueError, match="request_batch must be >= 1"):
        OpenVinoRunner(Path("unused"), threads=1, request_batch=0)


def test_openvino_streams_return_rows_in_batch_order(tiny_model_spec: str, tmp_path: Path) -> None:
    load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=tmp_path)
    (entry,) = (p for p in (tmp_path / "openvino").iterdir() if not p.name.startswith("."))
    batch = _pixels(7).numpy()
    one = OpenVinoRunner(entry, threads=1, streams=1)(batch)
    split = OpenVinoRunner(entry, threads=2, streams=3)
    np.testing.assert_allclose(split(batch), one, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(split(batch[:1]), one[:1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(split(batch[:2]), one[:2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("streams", "request_batch"), [(1, 1), (2, 1), (3, 2), (1, 3)])
def test_openvino_static_requests_give_the_dynamic_batch_rows(
    streams: int, request_batch: int, tiny_model_spec: str, tmp_path: Path
) -> None:
    load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=tmp_path)
    (entry,) = (p for p in (tmp_path / "openvino").iterdir() if not p.name.startswith("."))
    batch = _pixels(7).numpy()
    dynamic = OpenVinoRunner(entry, threads=1, streams=1)
    static = OpenVinoRunner(entry, threads=streams, streams=streams, request_batch=request_batch)
    assert static.request_batch == request_batch  # the model took the static batch
    shape = static._compiled.input(0).get_partial_shape()
    assert not shape.is_dynamic and shape[0].get_length() == request_batch
    for n in (7, 1, 2, 5):  # a last request that is padded, and batches shorter than a request
        got = static(batch[:n])
        assert got.shape == (n, dynamic(batch[:1]).shape[1])
        np.testing.assert_allclose(got, dynamic(batch[:n]), rtol=1e-5, atol=1e-6)


def test_the_launched_runner_uses_static_requests(tiny_model_spec: str, tmp_path: Path) -> None:
    load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=tmp_path)
    (entry,) = (p for p in (tmp_path / "openvino").iterdir() if not p.name.startswith("."))
    runner = open_runner(entry, threads=2, batch_size=8)
    assert runner.request_batch == REQUEST_BATCH
    assert len(runner._requests) == stream_count(2, 8)


def test_the_static_batch_ir_is_saved_once_and_a_broken_one_replaced(
    tiny_model_spec: str, tmp_path: Path
) -> None:
    load_embedder_on_backend(tiny_model_spec, backend="openvino", cache_dir=tmp_path)
    (entry,) = (p for p in (tmp_path / "openvino").iterdir() if not p.name.startswith("."))
    batch = _pixels(3).numpy()
    want = OpenVinoRunner(entry, threads=1, streams=1)(batch)
    OpenVinoRunner(entry, threads=1, request_batch=2)
    saved = entry / COMPILED_CACHE / "static-batch-2" / MODEL_FILE
    assert saved.is_file() and saved.with_suffix(".bin").is_file()
    written = saved.stat().st_mtime_ns
    again = OpenVinoRunner(entry, threads=1, request_batch=2)  # reads the saved file
    assert saved.stat().st_mtime_ns == written
    np.testing.assert_allclose(again(batch), want, rtol=1e-5, atol=1e-6)
    saved.write_text("<net>half written")  # a broken copy: compiled from the export instead
    fallback = OpenVinoRunner(entry, threads=1, request_batch=2)
    assert fallback.request_batch == 2
    np.testing.assert_allclose(fallback(batch), want, rtol=1e-5, atol=1e-6)
    assert not saved.exists()  # removed, so the next start saves it again
    OpenVinoRunner(entry, threads=1, request_batch=2)
    assert saved.is_file() and saved.stat().st_mtime_ns != written
