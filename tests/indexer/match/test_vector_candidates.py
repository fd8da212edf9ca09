"""The audit's embedding candidates: ``TOP_K`` nearest corpus items per test image, and
``SMALL_TOP_K`` for a small one (in a corpus of many thumbnails unrelated ones outrank a
re-scraped copy), from one search of the split."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from splitaudit.indexer.match import pair_search
from splitaudit.indexer.match.low_res_align import MAX_SIDE
from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.store.float_index import FloatStore


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _corpus(query: np.ndarray, n: int = 400, seed: int = 3) -> tuple[FloatStore, np.ndarray]:
    """``n`` items all within cosine 0.55-0.99 of ``query``, ids 1..n, in shuffled order."""
    rng = np.random.default_rng(seed)
    noise = _unit(rng.standard_normal((n, len(query))))
    noise -= (noise @ query)[:, None] * query  # orthogonal to the query
    noise = _unit(noise)
    cos = rng.permutation(np.linspace(0.99, 0.55, n)).astype(np.float32)
    vecs = _unit(cos[:, None] * query + np.sqrt(1 - cos[:, None] ** 2) * noise)
    store = FloatStore.create(model_id="m", dim=len(query))
    store.add(np.arange(1, n + 1, dtype=np.int64), vecs)
    return store, vecs


def _nominated(
    store: FloatStore, queries: np.ndarray, wide: np.ndarray | None
) -> dict[int, set[int]]:
    pairs: dict[tuple[int, int], Pair] = {}

    def pair(row: int, item_id: int) -> Pair:
        return pairs.setdefault((row, item_id), Pair(row=row, item_id=item_id))

    pair_search.vector_pairs(store.search, queries, DEFAULT_THRESHOLDS, pair, wide=wide)
    out: dict[int, set[int]] = {r: set() for r in range(len(queries))}
    for row, item_id in pairs:
        out[row].add(item_id)
    return out


def test_a_small_test_image_gets_more_embedding_candidates_than_a_large_one() -> None:
    query = _unit(np.random.default_rng(1).standard_normal((1, 32)))[0]
    store, vecs = _corpus(query)
    ranked = np.argsort(-(vecs @ query)) + 1  # ids, nearest first
    queries = np.stack([query, query])
    got = _nominated(store, queries, wide=np.array([True, False]))
    assert got[0] == set(ranked[: pair_search.SMALL_TOP_K].tolist())
    assert got[1] == set(ranked[: pair_search.TOP_K].tolist())
    # the rank-30 item: a small query's candidate, not a large one's
    assert int(ranked[29]) in got[0] and int(ranked[29]) not in got[1]


def test_without_small_rows_the_search_is_the_plain_top_k() -> None:
    query = _unit(np.random.default_rng(2).standard_normal((1, 16)))[0]
    store, _vecs = _corpus(query, n=100)
    asked: list[int] = []

    def search(q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        asked.append(k)
        return store.search(q, k)

    pairs: dict[tuple[int, int], Pair] = {}
    pair_search.vector_pairs(
        search,
        query[None],
        DEFAULT_THRESHOLDS,
        lambda r, i: pairs.setdefault((r, i), Pair(row=r, item_id=i)),
        wide=np.array([False]),
    )
    assert asked == [pair_search.TOP_K] and len(pairs) == pair_search.TOP_K
    assert pair_search.search_k(np.array([False, True])) == pair_search.SMALL_TOP_K
    assert pair_search.search_k(None) == pair_search.TOP_K


def test_candidates_below_the_floor_are_left_out_whatever_the_rank() -> None:
    query = _unit(np.random.default_rng(5).standard_normal((1, 16)))[0]
    store, vecs = _corpus(query, n=100)
    floor = min(DEFAULT_THRESHOLDS.candidate_cosine, DEFAULT_THRESHOLDS.semantic_cosine)
    got = _nominated(store, query[None], wide=np.array([True]))
    scores = vecs @ query
    assert all(scores[i - 1] >= floor - 1e-6 for i in got[0])


def test_small_rows_are_those_under_small_side() -> None:
    state = SimpleNamespace(min_side=np.array([32, 95, 96, 400]))
    assert pair_search.small_rows(state, DEFAULT_THRESHOLDS).tolist() == [True, True, False, False]  # type: ignore[arg-type]


def test_shape_rows_are_the_small_ones_and_every_thumbnail() -> None:
    """The shape search: under ``small_side`` or at most ``SHAPE_SIDE`` (96) px, so a 96-px
    test image is searched at the default ``small_side`` (96), where it is not small."""
    state = SimpleNamespace(min_side=np.array([32, 95, 96, 97, 150, 400]))
    rows = pair_search.shape_rows(state, DEFAULT_THRESHOLDS)  # type: ignore[arg-type]
    assert pair_search.SHAPE_SIDE == 96
    assert pair_search.SHAPE_SIDE == MAX_SIDE  # the sides the alignment covers
    assert rows.tolist() == [True, True, True, False, False, False]
    for side, expected in ((48, rows.tolist()), (200, [True] * 5 + [False])):
        th = replace(DEFAULT_THRESHOLDS, small_side=side)
        assert pair_search.shape_rows(state, th).tolist() == expected  # type: ignore[arg-type]


def test_pairs_only_the_wider_search_nominated_are_marked_wide_only() -> None:
    query = _unit(np.random.default_rng(7).standard_normal((1, 16)))[0]
    store, vecs = _corpus(query, n=100)
    ranked = (np.argsort(-(vecs @ query)) + 1).tolist()
    pairs: dict[tuple[int, int], Pair] = {}

    def pair(row: int, item_id: int) -> Pair:
        return pairs.setdefault((row, item_id), Pair(row=row, item_id=item_id))

    hashed = ranked[pair_search.TOP_K + 5]  # a hash candidate too: not wide-only
    pair(0, hashed).hamming = 18
    pair_search.vector_pairs(
        store.search, query[None], DEFAULT_THRESHOLDS, pair, wide=np.array([True])
    )
    wide = {item for (_row, item), p in pairs.items() if p.wide_only}
    assert wide == set(ranked[pair_search.TOP_K : pair_search.SMALL_TOP_K]) - {hashed}
    assert not any(pairs[(0, i)].wide_only for i in ranked[: pair_search.TOP_K])


def test_wide_only_pairs_are_not_turned(monkeypatch: pytest.MonkeyPatch) -> None:
    """``turn_small_pairs`` orients a small candidate by its closest turned pHash; a pair only
    the wider search nominated stays upright (turned, unrelated tiles verified at 0.70-0.83)."""
    from splitaudit.indexer.features.perceptual import ORIENTATIONS
    from splitaudit.indexer.match import small_pairs

    oriented = np.arange(1, len(ORIENTATIONS) + 1, dtype=np.uint64) * np.uint64(0x0101010101)
    turn = ORIENTATIONS.index("rot90")
    monkeypatch.setattr(
        small_pairs, "column_by_id", lambda _s, _c, ids: {i: int(oriented[turn]) for i in ids}
    )

    class _State(SimpleNamespace):
        def __len__(self) -> int:
            return 1

    state = _State(phash_oriented=oriented[None])
    plain, wide = (
        Pair(0, 1, cosine=0.7, min_side=32),
        Pair(0, 2, cosine=0.6, min_side=32, wide_only=True),
    )
    small_pairs.turn_small_pairs(None, state, [plain, wide], DEFAULT_THRESHOLDS)  # type: ignore[arg-type]
    assert plain.orientation == "rot90" and plain.hamming == 0
    assert wide.orientation == "identity" and wide.hamming is None
