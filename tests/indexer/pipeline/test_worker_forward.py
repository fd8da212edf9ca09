"""The decode workers run a small exported model's forward pass themselves: same vectors."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from pathlib import Path

import numpy as np
import pytest
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.db.models import Item
from splitaudit.indexer.embed.backends import exported, load_embedder_on_backend
from splitaudit.indexer.embed.backends.exported import ExportedEmbedder, WorkerEmbedder
from splitaudit.indexer.embed.loader import load_embedder
from splitaudit.indexer.pipeline.extract import (
    Extracted,
    Extractor,
    embed_input_of,
    worker_forward,
)
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.pipeline.rows import prepare_batch
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.record import Locator, Record
from splitaudit.indexer.store.vectors import read_batch
from splitaudit.indexer.workspace import Workspace

EXPORTED = ["onnxruntime", "openvino"]


@pytest.fixture(scope="module", params=EXPORTED)
def fast(
    request: pytest.FixtureRequest, tiny_model_spec: str, tmp_path_factory: Path
) -> ExportedEmbedder:
    cache = tmp_path_factory.mktemp(f"exports-{request.param}")  # type: ignore[attr-defined]
    embedder = load_embedder_on_backend(tiny_model_spec, backend=request.param, cache_dir=cache)
    assert isinstance(embedder, ExportedEmbedder)
    return embedder


def _records(folder: Path, n: int, *, broken: int | None = None) -> list[Record]:
    folder.mkdir(exist_ok=True)
    records = []
    for i in range(n):
        path = folder / f"{i}.jpg"
        if i == broken:
            path.write_bytes(b"\xff\xd8\xff not a jpeg")
        else:
            photo(i, (180 + 13 * i, 140 + 7 * (i % 3))).save(path, quality=90)
        records.append(
            Record(key=path.name, source="t", shard="s", locator=Locator("file", path=str(path)))
        )
    return records


def _embed_in(worker: WorkerEmbedder, images: list[object]) -> np.ndarray:
    return worker.embed(images)  # type: ignore[arg-type]


def test_worker_embedder_is_small_to_pickle_and_embeds_as_the_exported_one(
    fast: ExportedEmbedder,
) -> None:
    worker = fast.in_workers()
    assert isinstance(worker, WorkerEmbedder)
    assert worker.model_id == fast.model_id and worker.dim == fast.dim
    blob = pickle.dumps(worker)
    assert len(blob) < 20_000  # the backend, the folder and the preprocess: no runner
    images = [photo(seed, (200 + 9 * seed, 150)) for seed in range(6)]
    want = fast.embed(images)
    with mp.get_context("fork").Pool(2) as pool:  # each worker opens the export for itself
        got = np.concatenate(pool.starmap(_embed_in, [(worker, images[:3]), (worker, images[3:])]))
    assert got.shape == want.shape and got.dtype == np.float32
    # one inference thread instead of the main process's: the same graph, rounding aside
    np.testing.assert_allclose(got, want, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_a_large_or_unknown_export_stays_in_the_main_process(
    fast: ExportedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert worker_forward(fast, workers=2) is not None
    assert worker_forward(fast, workers=1) is None  # no pool: the main process embeds
    assert worker_forward(None, workers=2) is None
    monkeypatch.setattr(exported, "WORKER_FORWARD_MAX_BYTES", 1024)
    assert fast.in_workers() is None and worker_forward(fast, workers=2) is None
    monkeypatch.undo()
    monkeypatch.setattr(fast, "export_dir", None)
    assert fast.in_workers() is None


def test_eager_torch_embeds_in_the_main_process(tiny_model_spec: str) -> None:
    assert worker_forward(load_embedder(tiny_model_spec), workers=2) is None


def test_the_pool_hands_over_vectors_instead_of_crops(
    fast: ExportedEmbedder, tmp_path: Path
) -> None:
    records = _records(tmp_path / "imgs", 7, broken=4)
    crop = embed_input_of(fast)
    batches = [records[:5], records[5:]]
    with Extractor(workers=2, keep_image=True, embed_input=crop) as pool:
        plain = [e for b in pool.map_batches(iter(batches)) for e in b]
    forward = worker_forward(fast, workers=2)
    with Extractor(workers=2, keep_image=True, embed_input=crop, forward=forward) as pool:
        got = [e for b in pool.map_batches(iter(batches)) for e in b]
    assert [e.record.key for e in got] == [e.record.key for e in plain]
    assert got[4].error and got[4].vector is None and plain[4].error == got[4].error
    good = [i for i in range(7) if i != 4]
    assert all(got[i].image is None and got[i].vector is not None for i in good)
    assert [got[i].features for i in good] == [plain[i].features for i in good]
    want = fast.embed([plain[i].image for i in good])  # type: ignore[misc]
    np.testing.assert_allclose(np.stack([got[i].vector for i in good]), want, atol=2e-5)  # type: ignore[misc]
    # the batch's rows: the workers' vectors, in order, and the broken file failed
    prepared = prepare_batch(got, embedder=fast)
    assert [r["key"] for r in prepared.items] == [records[i].key for i in good]
    assert prepared.vectors is not None
    np.testing.assert_allclose(prepared.vectors, want, atol=2e-5)
    assert [f["key"] for f in prepared.failed] == ["4.jpg"]


def test_a_batch_mixing_worker_vectors_and_images_keeps_each_items_vector(
    fast: ExportedEmbedder, tmp_path: Path
) -> None:
    records = _records(tmp_path / "imgs", 4)
    crop = embed_input_of(fast)
    with Extractor(workers=1, keep_image=True, embed_input=crop) as pool:
        plain = next(pool.map_batches(iter([records])))
    want = fast.embed([e.image for e in plain])  # type: ignore[misc]
    mixed: list[Extracted] = [
        Extracted(e.record, e.features, image=None, vector=want[i]) if i % 2 else e
        for i, e in enumerate(plain)
    ]
    prepared = prepare_batch(mixed, embedder=fast)
    assert prepared.vectors is not None
    np.testing.assert_allclose(prepared.vectors, want, atol=1e-6)


def test_indexing_with_worker_forward_stores_the_main_process_vectors(
    fast: ExportedEmbedder, tiny_model_spec: str, tmp_path: Path
) -> None:
    root = tmp_path / "corpus"
    _records(root, 9)
    stored = {}
    for workers in (1, 2):  # 1: no pool, the main process embeds; 2: the workers do
        ws = Workspace.open(tmp_path / f"home{workers}")
        summary = index_sources(
            ws,
            "c",
            [FolderSource(root)],
            embedder=fast,
            workers=workers,
            batch_size=4,
            model_spec=tiny_model_spec,
        )
        assert summary.indexed == 9
        vectors = {}
        with ws.sessions() as s:
            keys = dict(s.execute(select(Item.id, Item.key)).tuples().all())
        for path in (ws.corpus_dir("c") / "vectors").glob("*.npz"):
            ids, vecs = read_batch(path)
            vectors.update({keys[int(i)]: v for i, v in zip(ids, vecs, strict=True)})
        ws.close()
        stored[workers] = vectors
    assert sorted(stored[1]) == sorted(stored[2]) and len(stored[1]) == 9
    for key, vector in stored[1].items():
        np.testing.assert_allclose(stored[2][key], vector, atol=2e-5)


def test_a_one_thread_openvino_runner_is_not_pinned_to_a_core(fast: ExportedEmbedder) -> None:
    """Each decode worker's one inference thread may run on any core: pinned, every worker's
    thread would land on the same one and the workers would take turns."""
    if fast.backend != "openvino":
        pytest.skip("OpenVINO's thread pinning")
    from splitaudit.indexer.embed.backends.openvino import OpenVinoRunner

    assert fast.export_dir is not None
    one = OpenVinoRunner(fast.export_dir, threads=1, streams=1, request_batch=1)
    assert one._compiled.get_property("ENABLE_CPU_PINNING") is False
