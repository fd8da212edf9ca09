"""The Hamming self-join (each pair of stored hashes checked once) against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.popcount import popcount
from splitaudit.indexer.store import hamming_join, hamming_mih, mih_self_join
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.hamming_join import HammingJoin, as_keys, stand_in_mask
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS, MultiIndexHash
from splitaudit.indexer.store.neighbours import Neighbours

MIRROR = 0x5555_5555_5555_5555


def _codes(rng: np.random.Generator, n: int) -> np.ndarray:
    """Near-duplicate families (0-12 bits flipped), mirrored copies, exact repeats and a
    crowded bucket (hundreds of hashes sharing their top 22 bits) among random hashes."""
    out = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    bases = rng.integers(0, 2**64 - 1, n // 25, dtype=np.uint64)
    for i in range(0, n, 3):
        value = int(bases[rng.integers(len(bases))])
        for bit in rng.choice(64, int(rng.integers(0, 13)), replace=False):
            value ^= 1 << int(bit)
        out[i] = value
    out[1:60:5] = out[0]
    out[2:400:7] = out[3:401:7] ^ np.uint64(MIRROR)
    crowd = np.uint64(0xABCDE) << np.uint64(42)
    low = rng.integers(0, 2**42, 300, dtype=np.uint64)
    out[-300:] = crowd | low
    out[-300:-150] = crowd | (low[:150] & np.uint64(0xFFF))  # close to each other too
    return out


def _brute_pairs(codes: np.ndarray, radius: int, mirror: int) -> set[tuple[int, int, int]]:
    dist = popcount((codes ^ np.uint64(mirror))[:, None] ^ codes[None, :])
    a, b = np.nonzero(np.triu(dist <= radius))
    return set(zip(a.tolist(), b.tolist(), dist[a, b].tolist(), strict=True))


def _crowded_codes(rng: np.random.Generator, n: int) -> np.ndarray:
    """Hashes whose block keys take few values (every bucket holds many hashes, at many
    levels), families and mirrored copies among them, and 400 copies of one value (a blank image's hash)."""
    keys = [rng.integers(0, 24, n, dtype=np.uint64) << np.uint64(s) for s in (42, 21, 0)]
    noise = rng.integers(0, 2**64 - 1, n, dtype=np.uint64) & np.uint64(0x00F0_00F0_00F0_00F0)
    out = keys[0] | keys[1] | keys[2] | noise
    out[: n // 3] = out[n // 3 : 2 * (n // 3)] ^ np.uint64(0b1001)
    out[-400:] = np.uint64(0x0123_4567_89AB_CDEF)
    out[-600:-400] = out[:200] ^ np.uint64(MIRROR)  # mirrored copies
    return out


# (how the deep levels are joined, hashes per probing pass): by default; level by level to
# the last; bucket pair by bucket pair from the first level; many small passes
PATHS = [(4, 16_384), (0, 16_384), (10**9, 16_384), (4, 300)]


@pytest.mark.parametrize("mirror", [0, MIRROR, 0b111])
@pytest.mark.parametrize(("factor", "chunk"), PATHS)
@pytest.mark.parametrize("fixture", ["families", "crowded"])
def test_self_join_is_every_pair_within_the_radius_once(
    monkeypatch: pytest.MonkeyPatch, mirror: int, factor: int, chunk: int, fixture: str
) -> None:
    monkeypatch.setattr(mih_self_join, "BUCKET_PAIRS_FACTOR", factor)
    monkeypatch.setattr(mih_self_join, "_CHUNK", chunk)
    rng = np.random.default_rng(3)
    codes = _codes(rng, 2500) if fixture == "families" else _crowded_codes(rng, 2500)
    mih = MultiIndexHash(codes, np.arange(len(codes), dtype=np.int64) * 5)
    radii = (0, 3, 8, MAX_EXACT_RADIUS) if (factor, chunk) == PATHS[0] else (8,)
    for radius in radii:
        a, b, d = mih.self_join(radius, mirror)
        got = list(zip(a.tolist(), b.tolist(), d.tolist(), strict=True))
        assert len(got) == len(set(got))  # each pair once
        want = _brute_pairs(codes, radius, mirror)
        assert set(got) == want
        if radius >= 8:
            assert len(want) > (len(codes) if mirror == 0 else 100)  # the fixture has pairs


@pytest.mark.parametrize("factor", [4, 0])  # bucket pairs from the first level; levels only
def test_self_join_of_uniform_hashes_past_one_bucket_per_key(
    monkeypatch: pytest.MonkeyPatch, factor: int
) -> None:
    """12k uniform hashes, near copies and mirrored copies, drawn into 2**10 keys of each
    block so that buckets hold ~12 hashes (a 21-bit block's load at ~25M hashes): the level
    tables down to the deep levels, the same pairs as brute force."""
    monkeypatch.setattr(mih_self_join, "BUCKET_PAIRS_FACTOR", factor)
    rng = np.random.default_rng(11)
    n = 12_000
    codes = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    for shift, width in hamming_mih.BLOCKS:  # keys from 2**10 of the 2**21 values
        field = np.uint64(((1 << width) - 1) << shift)
        few = rng.integers(0, 2**10, n, dtype=np.uint64) << np.uint64(shift + width - 10)
        codes = (codes & ~field) | few
    codes[1::7] = codes[::7][: len(codes[1::7])] ^ np.uint64(0b1_0000_0001_0001)
    codes[2::7] = codes[::7][: len(codes[2::7])] ^ np.uint64(MIRROR ^ 0b110)
    mih = MultiIndexHash(codes, np.arange(n, dtype=np.int64))
    for mirror in (0, MIRROR):
        a, b, d = mih.self_join(8, mirror)
        got = list(zip(a.tolist(), b.tolist(), d.tolist(), strict=True))
        assert len(got) == len(set(got))
        want: set[tuple[int, int, int]] = set()
        for start in range(0, n, 2000):  # brute force in slices
            dist = popcount(
                (codes[start : start + 2000] ^ np.uint64(mirror))[:, None] ^ codes[None, :]
            )
            i, j = np.nonzero(dist <= 8)
            i = i + start
            keep = i <= j
            want |= set(
                zip(
                    i[keep].tolist(),
                    j[keep].tolist(),
                    dist[i[keep] - start, j[keep]].tolist(),
                    strict=True,
                )
            )
        assert set(got) == want
        assert len(want) > (n + n // 7 if mirror == 0 else n // 7)


def test_self_join_refuses_a_radius_it_cannot_answer_exactly() -> None:
    mih = MultiIndexHash(np.arange(10, dtype=np.uint64), np.arange(10, dtype=np.int64))
    with pytest.raises(ValueError, match="exact only up to"):
        mih.self_join(MAX_EXACT_RADIUS + 1)


def _table(table: Neighbours) -> list[tuple[int, int, int]]:
    query = np.repeat(table.keys, np.diff(table.offsets))
    return list(zip(query.tolist(), table.ids.tolist(), table.scores.tolist(), strict=True))


def _searched(codes: np.ndarray, ids: np.ndarray, queries: np.ndarray, radius: int) -> list:  # type: ignore[type-arg]
    """The radius table as one search per distinct query (the join's answer before)."""
    values = np.unique(queries)
    offsets, hit_ids, dists = MultiIndexHash(codes, ids).search_radius_csr(values, radius)
    query = np.repeat(as_keys(values), np.diff(offsets))
    return _table(
        Neighbours.from_pairs(as_keys(values), query, hit_ids, dists, k=None, descending=False)
    )


@pytest.mark.parametrize("mirror", [None, MIRROR])
@pytest.mark.parametrize("asked", ["all", "most", "few"])
def test_radius_join_answers_as_one_search_per_value(mirror: int | None, asked: str) -> None:
    rng = np.random.default_rng(4)
    codes = _codes(rng, 3000)
    ids = rng.permutation(10_000)[: len(codes)].astype(np.int64)
    store = BinaryStore.create()
    store.add(ids, codes)
    queried = {"all": codes, "most": codes[: 2 * len(codes) // 3], "few": codes[:200]}[asked]
    others = rng.integers(0, 2**64 - 1, 50, dtype=np.uint64)  # values stored nowhere
    queries = np.r_[queried, queried ^ np.uint64(MIRROR), others, codes[:5] ^ np.uint64(1)]
    for radius in (2, 8):
        got = _table(HammingJoin(store).radius(queries, radius, mirror=mirror))
        assert got == _searched(codes, ids, queries, radius)
        assert len(got) > len(np.unique(queried))  # itself for each, and its family


def test_stand_in_mask_is_read_from_values_followed_by_their_stand_ins() -> None:
    codes = np.array([5, 9, 1 << 63, 77], np.uint64)
    assert stand_in_mask(np.r_[codes, codes ^ np.uint64(MIRROR)]) == MIRROR
    assert stand_in_mask(codes) is None  # 5 ^ (1 << 63) and 9 ^ 77 differ
    assert stand_in_mask(np.r_[codes, codes]) is None  # no stand-ins
    assert stand_in_mask(np.r_[codes, codes[:3]]) is None
    assert stand_in_mask(np.empty(0, np.uint64)) is None


def test_radius_join_reads_the_mirror_from_the_queries() -> None:
    rng = np.random.default_rng(5)
    codes = _codes(rng, 2000)
    ids = np.arange(len(codes), dtype=np.int64) + 7
    store = BinaryStore.create()
    store.add(ids, codes)
    queries = np.r_[codes, codes ^ np.uint64(MIRROR)]
    got = _table(HammingJoin(store).radius(queries, 8))
    assert got == _table(HammingJoin(store).radius(queries, 8, mirror=MIRROR))
    assert got == _searched(codes, ids, queries, 8)
    knn = HammingJoin(store).knn(queries, 3, 8)
    assert _table(knn) == _table(HammingJoin(store).knn(queries, 3, 8, mirror=MIRROR))


@pytest.mark.parametrize("brute_pairs", [None, 1_000])
@pytest.mark.parametrize(("radius", "max_radius"), [(8, 20), (8, 11), (4, 9), (12, 20)])
def test_one_join_answers_the_radius_and_the_knn_as_two_would(
    monkeypatch: pytest.MonkeyPatch, brute_pairs: int | None, radius: int, max_radius: int
) -> None:
    """Past ``BRUTE_PAIRS`` the radius table is the k-NN's wider join cut to ``radius`` bits;
    both tables equal the two searches, entry for entry and in order (radius 12 is over the
    exact radius: searched apart)."""
    if brute_pairs is not None:
        monkeypatch.setattr(hamming_join, "BRUTE_PAIRS", brute_pairs)
    rng = np.random.default_rng(6)
    codes = _codes(rng, 2500)
    ids = np.arange(len(codes), dtype=np.int64) * 3 + 1
    store = BinaryStore.create()
    store.add(ids, codes)
    queries = np.r_[codes, codes ^ np.uint64(MIRROR)]
    join = HammingJoin(store)
    joins: list[int] = []
    radius_join = join.radius
    monkeypatch.setattr(
        join, "radius", lambda *a, **kw: joins.append(a[1]) or radius_join(*a, **kw)
    )
    within, nearest = join.radius_and_knn(queries, radius, 10, max_radius, mirror=MIRROR)
    shared = brute_pairs is not None and radius <= MAX_EXACT_RADIUS
    if shared:  # one join, at the k-NN's exact radius
        assert joins == [min(max_radius, MAX_EXACT_RADIUS)]
    else:  # the radius join first, then the k-NN's own search
        assert joins[0] == radius
    expected_within = _table(radius_join(queries, radius, mirror=MIRROR))
    expected_nearest = _table(join.knn(queries, 10, max_radius, mirror=MIRROR))
    assert _table(within) == expected_within
    assert _table(nearest) == expected_nearest
    assert len(expected_within) > len(codes)  # every hash finds itself, families more
    # a table cut to its own radius is itself; cut to 0 bits, only exact repeats stay
    assert within.within(radius) is within
    exact = within.within(0)
    assert (exact.scores == 0).all() and np.diff(exact.offsets).min() >= 0
    assert exact.pairs == int((within.scores == 0).sum())
