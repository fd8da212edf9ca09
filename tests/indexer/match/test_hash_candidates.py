"""The audit's pHash verification candidates: from the multi-index hash tables on a large
corpus (exact within ``knn_exact_radius`` bits), from the exhaustive k-NN on a small one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from splitaudit.indexer.match import pair_search
from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.popcount import popcount
from splitaudit.indexer.store.binary_index import BinaryStore


def _flip(value: int, bits: list[int]) -> int:
    for b in bits:
        value ^= 1 << b
    return value


class _State(SimpleNamespace):
    """The split arrays ``pair_search.hash_pairs`` reads."""

    def __len__(self) -> int:
        return len(self.phash)


def _candidates(store: BinaryStore, queries: list[int]) -> dict[tuple[int, int], tuple[int, str]]:
    """(row, item id) -> (Hamming, orientation) of every pair the hash tier nominates."""
    q = np.array(queries, np.uint64)
    mirror = np.random.default_rng(9).integers(0, 2**64 - 1, len(q), dtype=np.uint64)
    state = _State(phash=q, phash_mirror=mirror, phash_oriented=None)
    pairs: dict[tuple[int, int], Pair] = {}

    def pair(row: int, item_id: int) -> Pair:
        return pairs.setdefault((row, item_id), Pair(row=row, item_id=item_id))

    pair_search.hash_pairs(store, state, DEFAULT_THRESHOLDS, pair)  # type: ignore[arg-type]
    return {k: (p.hamming, p.orientation) for k, p in pairs.items() if p.hamming is not None}


def test_candidates_come_from_the_tables_within_their_exact_radius() -> None:
    rng = np.random.default_rng(4)
    codes = rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64)
    ids = np.arange(1, 5001, dtype=np.int64)
    store = BinaryStore.create()
    store.add(ids, codes)
    base = int(codes[0])
    near, mid, far = (
        _flip(base, [1, 2, 3]),
        _flip(base, list(range(10))),
        _flip(base, list(range(15))),
    )
    flat = _candidates(store, [near, mid, far])
    # exhaustive (small corpus): the source item at 3, 10 and 15 bits, and up to 10 within 20
    assert flat[(0, 1)][0] == 3 and flat[(1, 1)][0] == 10 and flat[(2, 1)][0] == 15
    within_20 = int((popcount(codes ^ np.uint64(far)) <= 20).sum())
    nominated = sum(1 for (row, _), (_, o) in flat.items() if row == 2 and o == "identity")
    assert nominated == min(10, within_20) and within_20 > 1
    store.use_mih(True)
    tables = _candidates(store, [near, mid, far])
    assert tables[(0, 1)][0] == 3 and tables[(1, 1)][0] == 10  # within 11 bits: as before
    assert (2, 1) not in tables  # 15 bits: beyond the tables' exact radius, not nominated
    # every pair the tables nominate is one the exhaustive search nominated, same distance
    assert all(flat.get(k) == d for k, d in tables.items())
    assert all(d <= 11 for d, _ in tables.values())
