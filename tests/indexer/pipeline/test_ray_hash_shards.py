"""A hash index with multi-index tables, cut into shards of consecutive positions (each mapping
only its own range of the saved file), answers the audit engine's two searches exactly as the
whole index: radius hits in corpus order, the k nearest within a radius with ties by id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from splitaudit.indexer.pipeline.ray_hash_shards import (
    HashShard,
    ShardedHashes,
    plan_hash_shards,
    shardable,
)
from splitaudit.indexer.store.binary_index import BinaryStore


def _store(folder: Path, n: int = 3000) -> tuple[BinaryStore, np.ndarray]:
    """``n`` hashes in clusters (a few bits flipped) and exact repeats (tied distances)."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2**63, n // 10, dtype=np.int64).astype(np.uint64)
    codes = np.repeat(base, 10)
    flips = rng.integers(0, 64, (n, 3))
    for c in range(3):
        keep = rng.random(n) < 0.5  # half the members keep each bit: exact repeats too
        codes ^= np.where(keep, np.uint64(0), np.uint64(1) << flips[:, c].astype(np.uint64))
    ids = rng.permutation(np.arange(1, n + 1, dtype=np.int64) * 7)  # ids not in position order
    store = BinaryStore.create()
    store.add(ids, codes)
    store.use_mih(True)
    store.save(folder, generation=1, max_item_id=int(ids.max()))
    return BinaryStore.load(folder), codes


def _sharded(specs: list[Any]) -> ShardedHashes:
    shards = [HashShard(s) for s in specs]
    return ShardedHashes(
        specs[0].total,
        specs[0].params,
        lambda method, *args: [getattr(sh, method)(*args) for sh in shards],
    )


def test_sharded_hash_searches_equal_the_whole_index(tmp_path: Path) -> None:
    store, codes = _store(tmp_path)
    assert shardable(store)
    assert plan_hash_shards(store, tmp_path, 3) == []  # small: whole in every actor
    specs = plan_hash_shards(store, tmp_path, 3, least=0)
    assert [(s.start, s.stop) for s in specs] == [(0, 1000), (1000, 2000), (2000, 3000)]
    sharded = _sharded(specs)
    queries = np.r_[codes[::37], np.uint64(12345)]
    for radius in (0, 4, 8, 11, 14):  # the tables up to 11 bits, FAISS's range search beyond
        whole = store.search_radius(queries, radius)
        parts = sharded.search_radius(queries, radius)
        for (wi, wd), (pi, pd) in zip(whole, parts, strict=True):
            assert np.array_equal(wi, pi) and np.array_equal(wd, pd)
    assert sum(len(i) for i, _d in store.search_radius(queries, 8)) > 2 * len(queries)
    for radius in (8, 11):  # the nearest few of each row's hits, as the whole index's tables
        whole = store.search_radius(queries, radius, max_results=3)
        parts = sharded.search_radius(queries, radius, max_results=3)
        for (wi, wd), (pi, pd) in zip(whole, parts, strict=True):
            assert len(wi) <= 3 and np.array_equal(wi, pi) and np.array_equal(wd, pd)
    for k, radius in ((10, 20), (3, 6), (10, 11)):
        want = store.search_knn_within(queries, k, radius)
        got = sharded.search_knn_within(queries, k, radius)
        assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    empty = sharded.search_knn_within(queries[:0], 10, 20)
    assert empty[0].shape == (0, 10)


def test_small_or_flat_hash_index_stays_whole(tmp_path: Path) -> None:
    store, _codes = _store(tmp_path, 200)
    assert len(plan_hash_shards(store, tmp_path, 1, least=0)) == 0
    store.use_mih(False)
    assert not shardable(store) and plan_hash_shards(store, tmp_path, 3, least=0) == []
