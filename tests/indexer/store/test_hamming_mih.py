"""Multi-index hashing returns exactly what brute-force Hamming search returns, for radius <= 11."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.popcount import popcount
from splitaudit.indexer.store import hamming_mih
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS, MultiIndexHash, flip_masks


def _brute(codes: np.ndarray, ids: np.ndarray, q: int, radius: int) -> dict[int, int]:
    d = popcount(codes ^ np.uint64(q))
    keep = d <= radius
    return dict(zip(ids[keep].tolist(), d[keep].tolist(), strict=True))


def _flip(rng: np.random.Generator, value: int, n: int) -> int:
    for bit in rng.choice(64, n, replace=False):
        value ^= 1 << int(bit)
    return value


@pytest.mark.parametrize("max_candidates", [8_000_000, 50])
def test_matches_brute_force_on_skewed_hashes(
    monkeypatch: pytest.MonkeyPatch, max_candidates: int
) -> None:
    monkeypatch.setattr(
        hamming_mih, "_MAX_CANDIDATES", max_candidates
    )  # also the chunk-splitting path
    rng = np.random.default_rng(0)
    # near-duplicate families + exact repeats, like real pHashes of a crawl
    bases = rng.integers(0, 2**64 - 1, 60, dtype=np.uint64)
    codes = np.array(
        [_flip(rng, int(bases[i % 60]), int(rng.integers(0, 12))) for i in range(3000)],
        dtype=np.uint64,
    )
    codes[:50] = codes[0]
    ids = np.arange(10, 3010, dtype=np.int64) * 3
    mih = MultiIndexHash(codes, ids)
    queries = [
        int(codes[0]),
        int(bases[5]),
        _flip(rng, int(bases[7]), 6),
        int(rng.integers(0, 2**63)),
    ]
    for radius in range(MAX_EXACT_RADIUS + 1):
        found = mih.search_radius(np.array(queries, np.uint64), radius)
        for q, (got_ids, got_d) in zip(queries, found, strict=True):
            assert dict(zip(got_ids.tolist(), got_d.tolist(), strict=True)) == _brute(
                codes, ids, q, radius
            )
            assert len(set(got_ids.tolist())) == len(got_ids)


def test_random_hashes_self_join_is_brute_force_with_full_buckets() -> None:
    """Uniform hashes (the dedup bench's) and one bucket of 300 repeats (past the one-byte
    bucket size), queried unsorted and repeated: same hits as brute force, in corpus order."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2**64 - 1, 4000, dtype=np.uint64)
    codes[100:400] = codes[7] ^ np.uint64(0b1011)  # 300 items within 3 bits of item 7
    ids = rng.permutation(4000).astype(np.int64) + 1
    mih = MultiIndexHash(codes, ids)
    queries = np.r_[codes[::-1][:1500], codes[7], codes[7]]
    for radius in (3, 8):
        offsets, got_ids, got_d = mih.search_radius_csr(queries, radius)
        assert len(offsets) == len(queries) + 1
        for row, q in enumerate(queries.tolist()):
            hits = got_ids[offsets[row] : offsets[row + 1]]
            assert dict(
                zip(hits.tolist(), got_d[offsets[row] : offsets[row + 1]].tolist(), strict=True)
            ) == _brute(codes, ids, q, radius)
            where = {int(i): p for p, i in enumerate(ids.tolist())}
            assert [where[i] for i in hits.tolist()] == sorted(where[i] for i in hits.tolist())
        assert offsets[-1] - offsets[-2] == 301  # item 7 and its 300 neighbours
        listed = mih.search_radius(queries, radius)
        assert all(
            np.array_equal(a, got_ids[offsets[r] : offsets[r + 1]])
            for r, (a, _d) in enumerate(listed)
        )


def test_refuses_radius_beyond_exact_range() -> None:
    mih = MultiIndexHash(np.array([1, 2], np.uint64), np.array([1, 2], np.int64))
    with pytest.raises(ValueError, match="exact only up to radius 11"):
        mih.search_radius(np.array([1], np.uint64), 12)


def test_flip_masks_count_and_popcount() -> None:
    masks = flip_masks(21, 2)
    assert len(masks) == 1 + 21 + 210 and len(set(masks.tolist())) == len(masks)
    assert max(bin(m).count("1") for m in masks.tolist()) == 2


def test_knn_within_is_the_exact_nearest_within_the_radius() -> None:
    rng = np.random.default_rng(1)
    bases = rng.integers(0, 2**64 - 1, 40, dtype=np.uint64)
    codes = np.array(
        [_flip(rng, int(bases[i % 40]), int(rng.integers(0, 14))) for i in range(4000)],
        dtype=np.uint64,
    )
    ids = np.arange(4000, dtype=np.int64) + 7
    mih = MultiIndexHash(codes, ids)
    queries = np.array(
        [_flip(rng, int(bases[i % 40]), int(rng.integers(0, 9))) for i in range(30)]
        + [int(rng.integers(0, 2**63))],
        np.uint64,
    )
    for k, radius in ((10, 11), (3, 6), (50, 9)):
        dists, found = mih.search_knn_within(queries, k, radius)
        assert dists.shape == found.shape == (len(queries), k)
        for row, q in enumerate(queries.tolist()):
            d = popcount(codes ^ np.uint64(q)).astype(np.int64)
            order = np.lexsort((ids, d))
            want = [(int(d[j]), int(ids[j])) for j in order[:k] if d[j] <= radius]
            got = [(int(a), int(b)) for a, b in zip(dists[row], found[row], strict=True) if b >= 0]
            assert got == want
            assert (found[row][len(want) :] == -1).all()
            assert (dists[row][len(want) :] == radius + 1).all()


def test_top_k_rows_keeps_the_nearest_per_row_in_order() -> None:
    offsets = np.array([0, 3, 3, 5], np.int64)
    ids = np.array([5, 6, 7, 1, 2], np.int64)
    dists = np.array([4, 1, 4, 0, 9], np.int32)
    d, i = hamming_mih.top_k_rows(offsets, ids, dists, 2, 99)
    assert i.tolist() == [[6, 5], [-1, -1], [1, 2]]
    assert d.tolist() == [[1, 4], [99, 99], [0, 9]]


def test_knn_within_recall_counts_ties_and_the_nearest() -> None:
    from splitaudit.indexer.store.calibrate import knn_within_recall

    truth = (np.array([[1, 3, 3], [2, 9, 9]], np.int32), np.array([[10, 11, 12], [20, -1, -1]]))
    # row 0: the nearest and a tie of the 3rd (another id at distance 3); row 1: missed
    found = (np.array([[1, 3, 21], [21, 21, 21]], np.int32), np.array([[10, 99, -1], [-1, -1, -1]]))
    at_k, at_1 = knn_within_recall(found, truth)
    assert at_k == 2 / 4 and at_1 == 0.5
    assert knn_within_recall(truth, truth) == (1.0, 1.0)
