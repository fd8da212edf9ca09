"""``Neighbours.from_pairs``'s packed sort gives the lexsort's order and tables."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.store.neighbours import Neighbours, _group_order, _sorted_unique


def _lexsort(query, ids, scores, descending):
    rank = -scores.astype(np.float64) if descending else scores.astype(np.float64)
    return np.lexsort((ids, rank, query))


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_packed_order_matches_lexsort(descending: bool, dtype: type) -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    query = rng.integers(0, 500, n)
    ids = rng.integers(0, 2**31 - 1, n)
    ids[: n // 4] = rng.integers(0, 50, n // 4)  # many equal ids: ties broken by score, then id
    if dtype is np.float32:
        # few distinct values, both signs and both zeros: ties and the sign handling
        scores = rng.choice(np.array([-1.0, -0.5, -0.0, 0.0, 0.25, 0.9, 1.0], np.float32), n)
    else:
        scores = rng.integers(-(2**31) + 1, 2**31, n).astype(np.int32)
        scores[: n // 2] = rng.integers(0, 4, n // 2)
    got = _group_order(query, ids, scores, descending)
    want = _lexsort(query, ids, scores, descending)
    # equal triples may come in either order: compare the sorted triples
    for col in (query, ids, scores):
        assert np.array_equal(col[got], col[want])


def test_out_of_range_ids_fall_back_to_lexsort() -> None:
    query = np.array([1, 0, 1, 0], np.int64)
    ids = np.array([2**40, -3, 5, 2**40], np.int64)
    scores = np.array([0.5, 0.5, 0.5, 0.9], np.float32)
    got = _group_order(query, ids, scores, True)
    assert np.array_equal(got, _lexsort(query, ids, scores, True))


def test_sorted_unique_matches_numpy() -> None:
    rng = np.random.default_rng(3)
    for values in (
        rng.integers(-9, 9, 1_000),
        np.arange(5, dtype=np.int64),
        np.empty(0, np.int64),
        np.array([4, 4, 4], np.int64),
    ):
        assert np.array_equal(_sorted_unique(values), np.unique(values))


def test_from_pairs_top_k_with_ties() -> None:
    keys = np.array([3, 1, 1, 7], np.int64)
    query = np.array([1, 1, 1, 3, 3], np.int64)
    ids = np.array([9, 4, 6, 2, 8], np.int64)
    scores = np.array([0.8, 0.9, 0.8, 0.7, 0.7], np.float32)
    table = Neighbours.from_pairs(keys, query, ids, scores, k=2, descending=True)
    assert table.keys.tolist() == [1, 3, 7]
    assert table.get(0)[0].tolist() == [4, 6]  # best first, then the lower id of the 0.8s
    assert table.get(1)[0].tolist() == [2, 8]
    assert table.get(2)[0].tolist() == []


def test_from_pairs_unique_drops_repeated_pairs_only() -> None:
    rng = np.random.default_rng(5)
    query = rng.integers(0, 40, 3_000)
    ids = rng.integers(0, 60, 3_000)
    scores = ((query * 7 + ids * 3) % 9).astype(np.int32)  # one score per (query, id)
    keys = np.arange(45, dtype=np.int64)
    got = Neighbours.from_pairs(keys, query, ids, scores, k=None, descending=False, unique=True)
    pairs = {(int(a), int(b)) for a, b in zip(query, ids, strict=True)}
    assert got.pairs == len(pairs)
    for row, key in enumerate(got.keys.tolist()):
        found, dist = got.get(row)
        assert sorted(found.tolist()) == sorted(b for a, b in pairs if a == key)
        assert np.all(np.diff(dist) >= 0)
    kept = Neighbours.from_pairs(keys, query, ids, scores, k=None, descending=False)
    assert kept.pairs == len(query)  # without ``unique`` every triple stays


def test_trimmed_rows_equal_tables_built_at_each_rows_k() -> None:
    rng = np.random.default_rng(3)
    n = 5_000
    query = rng.integers(0, 300, n)
    ids = rng.integers(0, 10_000, n)
    scores = rng.random(n).astype(np.float32)
    keys = np.arange(0, 320)  # keys 300-319: no pair
    wide = Neighbours.from_pairs(keys, query, ids, scores, k=50, descending=True, unique=True)
    wider = np.arange(0, 320, 7)  # every seventh key keeps 50
    cut = wide.trimmed(10, wider=wider, wide_k=50)
    at10 = Neighbours.from_pairs(keys, query, ids, scores, k=10, descending=True, unique=True)
    for row, key in enumerate(keys.tolist()):
        want = wide.get(row) if key % 7 == 0 else at10.get(row)
        got = cut.get(row)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert np.diff(cut.offsets)[keys % 7 != 0].max() == 10
    assert np.diff(cut.offsets)[keys % 7 == 0].max() > 10
    assert wide.trimmed(50, wider=wider, wide_k=50) is wide  # nothing to cut: the same table
