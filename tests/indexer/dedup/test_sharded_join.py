"""Dedup's self-joins cut into shards (run here, one ``JoinShard`` per shard) give the tables of
the whole joins: ids slot by slot, cosines to the bit, ties included; each vector shard maps
only its part of the index."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from splitaudit.indexer.dedup.self_joins import LocalSelfJoins
from splitaudit.indexer.dedup.sharded_join import JoinShard, ShardedSelfJoins, value_parts
from splitaudit.indexer.store import hamming_join, vector_join
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.exact import DB_BLOCK
from splitaudit.indexer.store.float_build import build_flat, build_ivf
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_join import as_keys
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.policy import IndexPolicy
from splitaudit.indexer.store.vectors import batch_path, write_batch

FLOOR, COSINE = 0.80, 0.90


class _FewLists(IndexPolicy):
    """Eight inverted lists whatever the size: lists large enough for ``split_cells`` to cut."""

    def nlist_for(self, count: int) -> int:
        return 8


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _corpus(folder: Path, n: int, dim: int) -> list[tuple[str, int]]:
    """``n`` unit vectors in batch files: one in five has a near copy (cosine ~0.95), one in
    twenty is repeated three times (tied scores)."""
    rng = np.random.default_rng(7)
    vecs = _unit(rng.standard_normal((n, dim)))
    rows = np.arange(0, n - 1, 5)
    vecs[rows + 1] = _unit(vecs[rows] + 0.08 * rng.standard_normal((len(rows), dim)))
    for r in range(2, n - 3, 20):
        vecs[r + 1] = vecs[r + 2] = vecs[r]
    ids = np.arange(1, n + 1, dtype=np.int64) * 3
    refs = []
    for b, s in enumerate(range(0, n, 2500)):
        write_batch(batch_path(folder, f"b{b}"), ids[s : s + 2500], vecs[s : s + 2500])
        refs.append((f"b{b}", len(ids[s : s + 2500])))
    return refs


def _saved(folder: Path, store: FloatStore) -> FloatStore:
    store.save(folder, generation=1, last_batch_id=1)
    return FloatStore.load(folder, model_id=store.model_id, dim=store.dim, mmap=True)


def _sharded(parts: int, hashes: BinaryStore, folder: Path) -> ShardedSelfJoins:
    shards = [JoinShard(hashes) for _ in range(parts)]

    def call(method: str, args: list[tuple[Any, ...]]) -> list[Any]:
        return [getattr(shards[n % parts], method)(*a) for n, a in enumerate(args)]

    return ShardedSelfJoins(call, parts, folder)


def _same(a: Neighbours, b: Neighbours) -> None:
    assert np.array_equal(a.keys, b.keys)
    assert np.array_equal(a.offsets, b.offsets)
    assert np.array_equal(a.ids, b.ids)  # ties land on the same ids, slot by slot
    assert a.scores.dtype == b.scores.dtype and a.scores.tobytes() == b.scores.tobytes()


def _check_vectors(folder: Path, store: FloatStore, refs: list[tuple[str, int]], parts: int):
    local, local_report = LocalSelfJoins().vectors(
        store, folder, refs, k=10, floor=FLOOR, cosine=COSINE
    )
    joins = _sharded(parts, BinaryStore.create(), folder)
    got, report = joins.vectors(store, folder, refs, k=10, floor=FLOOR, cosine=COSINE)
    _same(got, local)
    assert local.pairs > len(local.keys)  # each item has itself and its planted copies
    assert report.method == local_report.method
    assert (report.nlist, report.nprobe, report.gap, report.coarse) == (
        local_report.nlist,
        local_report.nprobe,
        local_report.gap,
        local_report.coarse,
    )
    assert report.probes_per_item == local_report.probes_per_item
    assert report.voronoi == local_report.voronoi
    return report, joins.mapped


def test_exact_join_by_flat_blocks(tmp_path: Path) -> None:
    n, dim = 2 * DB_BLOCK + 3000, 8
    refs = _corpus(tmp_path, n, dim)
    store = _saved(tmp_path, build_flat(tmp_path, refs, model_id="m", dim=dim))
    report, mapped = _check_vectors(tmp_path, store, refs, 2)
    assert report.method == "exact"
    assert mapped == [2 * DB_BLOCK * (4 * dim + 8), 3000 * (4 * dim + 8)]


def test_kmeans_cells_of_a_flat_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_join, "EXACT_JOIN_MAX", 1000)  # cells, not exhaustive
    n, dim = 6000, 8
    refs = _corpus(tmp_path, n, dim)
    store = _saved(tmp_path, build_flat(tmp_path, refs, model_id="m", dim=dim))
    report, mapped = _check_vectors(tmp_path, store, refs, 3)
    assert report.method == "ivf"
    # each shard was sent its own cells' vectors only
    assert sum(mapped) == n * dim * 4 and max(mapped) < n * dim * 4


def test_two_level_coarse_step_of_clustered_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Low-dimensional clusters: the calibration picks the two-level coarse step, and the
    driver probes exactly as the local join does."""
    monkeypatch.setattr(vector_join, "EXACT_JOIN_MAX", 1000)
    n, dim = 12_000, 6
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((300, dim))
    vecs = _unit(centres[rng.integers(0, 300, n)] + 0.25 * rng.standard_normal((n, dim)))
    ids = np.arange(1, n + 1, dtype=np.int64) * 3
    refs = []
    for b, s in enumerate(range(0, n, 2500)):
        write_batch(batch_path(tmp_path, f"b{b}"), ids[s : s + 2500], vecs[s : s + 2500])
        refs.append((f"b{b}", len(ids[s : s + 2500])))
    store = _saved(tmp_path, build_flat(tmp_path, refs, model_id="m", dim=dim))
    report, _mapped = _check_vectors(tmp_path, store, refs, 3)
    assert report.method == "ivf" and report.coarse is not None
    assert report.coarse["width"] is not None and report.coarse["width"] <= report.nlist // 2


@pytest.mark.parametrize(
    "storage,few_lists,ondisk,voronoi",
    [
        ("fp16", False, False, True),
        ("sq8", False, False, True),
        ("fp16", True, False, True),
        ("fp16", True, False, False),
        ("fp32", True, True, True),
    ],
)
def test_ivf_cells_by_list_range(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    storage: str,
    few_lists: bool,
    ondisk: bool,
    voronoi: bool,
) -> None:
    monkeypatch.setattr(vector_join, "VORONOI", voronoi)
    monkeypatch.setattr(vector_join, "VORONOI_GAIN", 100.0)  # regrouped wherever it may be
    n, dim = 6000, 8
    refs = _corpus(tmp_path, n, dim)
    cls = _FewLists if few_lists else IndexPolicy
    policy = cls(
        flat_max=1000,
        calibration_queries=200,
        storage=storage,  # type: ignore[arg-type]
        ondisk_min=1000 if ondisk else 2_000_000,
        ondisk_shard_rows=2000,
    )
    store = _saved(
        tmp_path, build_ivf(tmp_path, refs, model_id="m", dim=dim, storage=storage, policy=policy)
    )
    assert store.is_ondisk == ondisk
    report, mapped = _check_vectors(tmp_path, store, refs, 2)
    assert report.method == "ivf"
    files = [tmp_path / "embeddings.faiss", *tmp_path.glob("embeddings.*.ivfdata")]
    whole = sum(f.stat().st_size for f in files)  # the lists on disk too
    if few_lists:  # lists of ~750 vectors: cut into sub-cells
        assert report.nlist > int(store.index.nlist)
        # regrouped by nearest centroid (the full coarse step runs on these vectors), each
        # shard sent its cells' vectors; else each reads its own range of lists
        assert report.voronoi is voronoi
        if voronoi:
            assert sum(mapped) == n * dim * 4
            return
    assert not report.voronoi
    assert len(mapped) == 2 and all(0 < m < 0.7 * whole for m in mapped)


@pytest.mark.parametrize("brute_pairs", [None, 1_000, 10_000_000])
def test_hash_knn_cut_by_query_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, brute_pairs: int | None
) -> None:
    if brute_pairs is not None:
        # k-NN by the tables here and in every shard; at 10M the whole join is over the
        # exhaustive limit (~6,500 values x 3,000 hashes) while each shard's third is under it
        monkeypatch.setattr(hamming_join, "BRUTE_PAIRS", brute_pairs)
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**63, 3000, dtype=np.uint64) * np.uint64(2)
    base[::7] ^= np.uint64(1) << np.uint64(63)  # values above 2^63: negative table keys
    base[1::10] = base[0::10] ^ np.uint64(0b1011)  # near copies (3 bits)
    base[2::50] = base[0::50]  # repeated hashes (tied distances)
    store = BinaryStore.create()
    store.add(np.arange(1, len(base) + 1, dtype=np.int64) * 2, base)
    mask = np.uint64(0x00FF)
    queries = np.r_[base, base ^ mask, rng.integers(0, 2**63, 500, dtype=np.uint64)]
    local = LocalSelfJoins()
    joins = _sharded(3, store, tmp_path)
    for max_radius in (6, 20):
        for mirror in (None, int(mask)):
            _same(
                joins.hash_knn(store, queries, 10, max_radius, mirror=mirror),
                local.hash_knn(store, queries, 10, max_radius, mirror=mirror),
            )
    # the radius join stays whole (a self-join of the store): the local one
    _same(joins.hash_radius(store, queries, 8), local.hash_radius(store, queries, 8))
    # both at once, from one join where the k-NN is a multi-index one: here, and on each
    # shard for its values (the radius join then runs on the shards, not here)
    asked: list[str] = []
    call = joins.call
    joins.call = lambda method, args: asked.append(method) or call(method, args)
    for max_radius in (6, 20):
        here = local.hash_tables(store, queries, 8, 10, max_radius, mirror=int(mask))
        cut = joins.hash_tables(store, queries, 8, 10, max_radius, mirror=int(mask))
        _same(here[0], local.hash_radius(store, queries, 8, mirror=int(mask)))
        _same(here[1], local.hash_knn(store, queries, 10, max_radius, mirror=int(mask)))
        _same(cut[0], here[0])
        _same(cut[1], here[1])
    # radius 8 fits within the k-NN's exact radius at max_radius 20, not at 6
    assert asked == ["hash_knn", "hash_knn" if brute_pairs is None else "hash_tables"]
    parts = value_parts(queries, 3)
    assert len(parts) == 3 and sum(len(p) for p in parts) == len(np.unique(queries))
    assert all(as_keys(a).max() < as_keys(b).min() for a, b in itertools.pairwise(parts))
