"""The shape store (``store.shape_index``): synced from ``Item.shape`` like the hash index, saved,
reloaded, rebuilt when its file cannot be trusted, searched exactly."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, Item
from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
from splitaudit.indexer.db.shape_blob import SHAPE_DIM, to_bytes
from splitaudit.indexer.store.corpus_index import sync_corpus_index
from splitaudit.indexer.store.shape_index import (
    SHAPES_FILE,
    ShapeStore,
    load_shapes,
    sync_shapes,
)
from splitaudit.indexer.workspace import Workspace


class Shapes:
    """A hash-only corpus whose items are written as the pipeline writes them: every other
    one a thumbnail with a descriptor, the rest photos without."""

    def __init__(self, home: Path) -> None:
        self.ws = Workspace.open(home)
        self.rng = np.random.default_rng(0)
        self.kept: dict[int, np.ndarray] = {}
        with transaction(self.ws.sessions) as s:
            corpus = ensure_corpus(s, name="c", model_id=None, dim=None)
            self.corpus_id = corpus.id
            self.shard_id = ensure_shard(s, corpus=corpus, source="syn", name="s").id

    def add(self, n: int) -> None:
        d = np.abs(self.rng.standard_normal((n, SHAPE_DIM))).astype(np.float32)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        with transaction(self.ws.sessions) as s:
            items = [
                Item(
                    corpus_id=self.corpus_id,
                    shard_id=self.shard_id,
                    key=uuid.uuid4().hex,
                    phash=1,
                    shape=to_bytes(d[i]) if i % 2 == 0 else None,
                )
                for i in range(n)
            ]
            s.add_all(items)
            s.flush()
            for i, item in enumerate(items):
                if i % 2 == 0:
                    self.kept[item.id] = d[i].astype(np.float16).astype(np.float32)
            s.execute(
                update(Corpus)
                .where(Corpus.id == self.corpus_id)
                .values(generation=Corpus.generation + 1)
            )

    @property
    def dir(self) -> Path:
        return self.ws.corpus_dir("c")

    def sync(self) -> ShapeStore:
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.ws.sessions() as s:
            return sync_shapes(s, s.get_one(Corpus, self.corpus_id), self.dir)


@pytest.fixture
def shapes(tmp_path: Path) -> Shapes:
    return Shapes(tmp_path / "home")


def _assert_holds(store: ShapeStore, expected: dict[int, np.ndarray]) -> None:
    assert store.ids.tolist() == sorted(expected)
    np.testing.assert_array_equal(
        store.vectors.astype(np.float32), np.stack([expected[i] for i in sorted(expected)])
    )


def test_sync_reads_the_thumbnails_then_only_the_new_rows(shapes: Shapes) -> None:
    shapes.add(40)
    first = shapes.sync()
    _assert_holds(first, shapes.kept)
    assert first.count == 20
    shapes.add(10)
    second = shapes.sync()
    _assert_holds(second, shapes.kept)
    assert second.count == 25
    reloaded = load_shapes(shapes.dir)
    assert reloaded is not None
    _assert_holds(reloaded, shapes.kept)
    with shapes.ws.sessions() as s:
        corpus = s.get_one(Corpus, shapes.corpus_id)
        assert reloaded.generation == corpus.generation == 2
        index = sync_corpus_index(s, corpus, shapes.dir)
    assert index.shapes is not None and index.shapes.count == 25


def test_an_unreadable_or_foreign_file_is_rebuilt_from_the_database(shapes: Shapes) -> None:
    shapes.add(20)
    shapes.sync()
    (shapes.dir / SHAPES_FILE).write_bytes(b"not a numpy file")
    assert load_shapes(shapes.dir) is None  # an actor: no shape search, no crash
    _assert_holds(shapes.sync(), shapes.kept)
    ahead = ShapeStore(generation=99, max_item_id=10**9)  # another database's file
    ahead.save(shapes.dir)
    _assert_holds(shapes.sync(), shapes.kept)


def test_search_is_exact_and_pads_past_the_store(shapes: Shapes) -> None:
    shapes.add(200)
    store = shapes.sync()
    ids = np.array(sorted(shapes.kept))
    base = np.stack([shapes.kept[i] for i in ids.tolist()])
    queries = base[[3, 50]] + 0.05
    scores, found = store.search(queries, 5)
    brute = queries @ base.T
    for row in range(2):
        order = np.argsort(-brute[row])[:5]
        assert found[row].tolist() == ids[order].tolist()
        np.testing.assert_allclose(scores[row], brute[row, order], rtol=1e-5)
    empty_scores, empty_ids = ShapeStore().search(queries, 3)
    assert (empty_ids == -1).all() and np.isneginf(empty_scores).all()
    few_scores, few_ids = store.search(queries, 150)
    assert np.isneginf(few_scores[:, 100:]).all()
    assert (few_ids[:, 100:] == -1).all() and sorted(few_ids[0, :100].tolist()) == ids.tolist()


def test_a_store_refuses_descriptors_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="descriptors"):
        ShapeStore(np.arange(3), np.zeros((3, 7)))
