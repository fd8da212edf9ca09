"""Indexing end to end: idempotent re-runs, new shards, failures recorded, FAISS ids = DB rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import photo
from sqlalchemy import func, select

from splitaudit.indexer.db.models import FailedItem, Item, VectorBatch
from splitaudit.indexer.pipeline.index import index_sources, open_corpus_index
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def _corpus(root: Path, shards: dict[str, range]) -> Path:
    for shard, seeds in shards.items():
        (root / shard).mkdir(parents=True, exist_ok=True)
        for s in seeds:
            photo(s, (96, 80)).save(root / shard / f"img{s}.jpg", quality=90)
    return root


def _counts(ws: Workspace) -> tuple[int, int, int]:
    with ws.sessions() as s:
        return (
            s.scalar(select(func.count(Item.id))) or 0,
            s.scalar(select(func.count(func.distinct(Item.key)))) or 0,
            s.scalar(select(func.count(FailedItem.id))) or 0,
        )


def test_rerun_adds_nothing_and_new_shard_adds_only_it(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "corpus", {"a": range(0, 6), "b": range(6, 10)})
    (root / "a" / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    ws = Workspace.open(tmp_path / "home")
    first = index_sources(ws, "c", [FolderSource(root)], embedder=None, batch_size=4)
    assert (first.indexed, first.failed) == (10, 1)
    assert first.failures[0][0] == "a/broken.jpg"
    again = index_sources(ws, "c", [FolderSource(root)], embedder=None)
    assert (again.indexed, again.failed, again.shards_skipped) == (0, 0, 2)
    _corpus(root, {"c": range(10, 13)})
    third = index_sources(ws, "c", [FolderSource(root)], embedder=None)
    assert (third.indexed, third.shards_done, third.shards_skipped) == (3, 1, 2)
    assert _counts(ws) == (13, 13, 1)
    index = open_corpus_index(ws, "c")
    assert index.hashes.count == 13 and index.floats is None


def test_labels_and_provenance_are_stored(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "corpus", {"cat": range(2), "dog": range(2, 3)})
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(root)], embedder=None)
    with ws.sessions() as s:
        rows = {i.key: i for i in s.scalars(select(Item))}
    assert rows["cat/img0.jpg"].label == "cat" and rows["dog/img2.jpg"].label == "dog"
    item = rows["cat/img1.jpg"]
    assert item.locator["kind"] == "file" and Path(item.locator["path"]).read_bytes()
    assert len(item.sha256 or "") == 64 and item.width == 96 and item.height == 80


def test_embedded_corpus_vectors_match_db_ids(tmp_path: Path, tiny_model_spec: str) -> None:
    from splitaudit.indexer.embed.loader import load_embedder

    root = _corpus(tmp_path / "corpus", {"a": range(0, 9)})
    ws = Workspace.open(tmp_path / "home")
    embedder = load_embedder(tiny_model_spec)
    index_sources(
        ws, "c", [FolderSource(root)], embedder=embedder, batch_size=4, model_spec=tiny_model_spec
    )
    index = open_corpus_index(ws, "c")
    assert index.floats is not None and index.floats.count == 9
    with ws.sessions() as s:
        ids = sorted(s.scalars(select(Item.id)).all())
        assert s.scalar(select(func.count(VectorBatch.id))) == 3
    stored = sorted(int(index.floats.index.id_map.at(i)) for i in range(index.floats.count))
    assert stored == ids
    # every vector is the item's own: its nearest neighbour is itself at cosine 1
    vec = index.floats.index.reconstruct(ids[4])
    scores, found = index.floats.search(np.asarray([vec]), 1)
    assert found[0, 0] == ids[4] and abs(scores[0, 0] - 1.0) < 1e-4
