"""Self-joins against brute force: no pair missed, no false pair (hashes and vectors)."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.popcount import popcount
from splitaudit.indexer.store import hamming_join
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.float_build import new_ivf, spherical_kmeans
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_join import HammingJoin, as_keys
from splitaudit.indexer.store.join_calibrate import calibrate_gap, calibrate_nprobe
from splitaudit.indexer.store.join_cells import (
    cell_lookup,
    cells_within,
    ivf_cells,
    kmeans_cells,
    split_cells,
)
from splitaudit.indexer.store.joined import JoinedFloats, JoinedHashes
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.vector_join import exact_join, ivf_join, self_join

MIRROR = np.uint64(0x5555_5555_5555_5555)


def _hashes(rng: np.random.Generator, n: int) -> np.ndarray:
    """Families of near-duplicate hashes (0-10 flipped bits) among random ones, with repeats."""
    bases = rng.integers(0, 2**64 - 1, n // 20, dtype=np.uint64)
    out = rng.integers(0, 2**64 - 1, n, dtype=np.uint64)
    for i in range(0, n, 3):
        value = int(bases[rng.integers(len(bases))])
        for bit in rng.choice(64, int(rng.integers(0, 11)), replace=False):
            value ^= 1 << int(bit)
        out[i] = value
    out[1:40:4] = out[0]
    return out


def _pairs(table: Neighbours) -> dict[tuple[int, int], float]:
    query = np.repeat(table.keys, np.diff(table.offsets))
    return dict(
        zip(
            zip(query.tolist(), table.ids.tolist(), strict=True),
            table.scores.tolist(),
            strict=True,
        )
    )


def _store(codes: np.ndarray, ids: np.ndarray) -> BinaryStore:
    store = BinaryStore.create()
    store.add(ids, codes)
    return store


def test_hamming_radius_join_is_brute_force() -> None:
    rng = np.random.default_rng(0)
    codes = _hashes(rng, 3000)
    ids = np.arange(3000, dtype=np.int64) * 7 + 1
    queries = np.r_[codes, codes ^ MIRROR]
    table = HammingJoin(_store(codes, ids)).radius(queries, 8)
    found = _pairs(table)
    dist = popcount(np.unique(queries)[:, None] ^ codes[None, :])
    qi, ci = np.nonzero(dist <= 8)
    truth = {
        (int(as_keys(np.unique(queries)[q : q + 1])[0]), int(ids[c])): int(dist[q, c])
        for q, c in zip(qi.tolist(), ci.tolist(), strict=True)
    }
    assert len(truth) > 3000  # families, repeats and the items themselves
    assert found == truth


@pytest.mark.parametrize("brute_pairs", [hamming_join.BRUTE_PAIRS, 0])
def test_hamming_knn_join_matches_brute_force_within_its_radius(
    monkeypatch: pytest.MonkeyPatch, brute_pairs: int
) -> None:
    monkeypatch.setattr(hamming_join, "BRUTE_PAIRS", brute_pairs)  # 0: the multi-index path
    rng = np.random.default_rng(1)
    codes = _hashes(rng, 2000)
    ids = np.arange(2000, dtype=np.int64) + 100
    queries = codes[:500]
    radius = 20 if brute_pairs else 11  # the MIH path is exact up to 11 bits
    table = HammingJoin(_store(codes, ids)).knn(queries, 10, radius)
    values = np.unique(queries)
    assert len(table) == len(values)
    for n, q in enumerate(values.tolist()):
        got_ids, got_d = table.get(int(table.rows(as_keys(values[n : n + 1]))[0]))
        dist = popcount(codes ^ np.uint64(q))
        # the claimed distances are the true ones, nearest first, all within the radius
        assert got_d.tolist() == dist[got_ids - 100].tolist() == sorted(got_d.tolist())
        assert (got_d <= radius).all()
        want = np.sort(dist[dist <= radius])[:10]
        assert got_d.tolist() == want.tolist()  # the k nearest: none missed


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _planted_vectors(n: int, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random unit vectors plus ~10% near copies (cosine ~0.95) of some of them; ids 3i+5."""
    rng = np.random.default_rng(seed)
    x = _unit(rng.standard_normal((n, dim)))
    src = rng.choice(n, n // 10, replace=False)
    dst = rng.permutation(np.setdiff1d(np.arange(n), src))[: n // 10]
    x[dst] = _unit(x[src] + 0.3 * rng.standard_normal((len(src), dim)) / np.sqrt(dim))
    return np.arange(n, dtype=np.int64) * 3 + 5, x


def _brute(ids: np.ndarray, x: np.ndarray, floor: float, k: int) -> dict[tuple[int, int], float]:
    scores = x @ x.T
    out: dict[tuple[int, int], float] = {}
    for r in range(len(x)):
        top = np.argsort(-scores[r], kind="stable")[:k]
        for c in top[scores[r, top] >= floor].tolist():
            out[(int(ids[r]), int(ids[c]))] = float(scores[r, c])
    return out


def _chunks(ids: np.ndarray, x: np.ndarray, rows: int = 700):  # type: ignore[no-untyped-def]
    return ((ids[s : s + rows], x[s : s + rows]) for s in range(0, len(ids), rows))


def test_exact_vector_join_is_brute_force() -> None:
    ids, x = _planted_vectors(3000)
    found = _pairs(exact_join(ids, x, _chunks(ids, x), k=10, floor=0.6))
    truth = _brute(ids, x, 0.6, 10)
    assert found.keys() == truth.keys()
    assert np.allclose([found[p] for p in truth], list(truth.values()), atol=1e-5)


def _ivf_store(ids: np.ndarray, x: np.ndarray, nlist: int, storage: str) -> FloatStore:
    rng = np.random.default_rng(0)
    centroids = spherical_kmeans(x, nlist, iters=8, rng=rng)
    store = FloatStore(
        new_ivf(x.shape[1], centroids, storage, x),
        model_id="m",
        dim=x.shape[1],
        index_type=f"IVF{nlist}",
        params={"storage": storage},
    )
    store.add(ids, x)
    return store


@pytest.mark.parametrize("probing", ["fixed", "gap"])
@pytest.mark.parametrize("source", ["kmeans", "ivf-fp16", "ivf-fp16-split"])
def test_cell_join_finds_every_planted_pair_and_no_false_one(source: str, probing: str) -> None:
    ids, x = _planted_vectors(4000)
    cells = (
        kmeans_cells(ids, x, 64)
        if source == "kmeans"
        else ivf_cells(_ivf_store(ids, x, 64, "fp16"))
    )
    if source.endswith("split"):
        cells = split_cells(cells, 20)  # ~62 per list: 3 sub-cells each
        assert cells.nlist > 150
    gap = None
    if probing == "fixed":
        nprobe, recall = calibrate_nprobe(cells, 0.9)
    else:
        gap, nprobe, recall = calibrate_gap(cells, 0.9)
        assert gap > 0
    assert 1 <= nprobe < cells.nlist and recall >= 0.999
    stats: dict[str, int] = {}
    own = cell_lookup(cells) if probing == "gap" else None
    found = _pairs(
        ivf_join(
            cells, _chunks(ids, x), k=10, floor=0.8, nprobe=nprobe, gap=gap, stats=stats, own=own
        )
    )
    assert stats["scored"] < len(ids) * cells.sizes.sum() / 4  # far from exhaustive
    truth = _brute(ids, x, 0.8, 10)
    planted = {p for p, s in truth.items() if s >= 0.9}
    assert len(planted) > 4000  # every item with itself, each copy both ways
    assert planted <= found.keys()  # no planted pair missed
    # no false pair: each found pair is among the brute-force ones, with its true cosine
    by_id = dict(zip(ids.tolist(), range(len(ids)), strict=True))
    for (a, b), score in found.items():
        assert (a, b) in truth
        assert abs(score - float(x[by_id[a]] @ x[by_id[b]])) < 2e-3  # fp16 codes


def test_cells_within_gap_are_those_of_the_full_score_matrix() -> None:
    rng = np.random.default_rng(3)
    q = rng.standard_normal((700, 16)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    c = rng.standard_normal((90, 16)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    scores = q @ c.T
    want = scores >= scores.max(axis=1, keepdims=True) - 0.3
    rows, cells = cells_within(q, c, 0.3, cap=90)
    got = np.zeros_like(want)
    got[rows, cells] = True
    assert np.array_equal(got, want) and np.all(np.diff(rows) >= 0)
    assert want.sum(axis=1).max() > 3  # the gap reaches several cells for some rows
    # a cap keeps each row's best cells only
    rows, cells = cells_within(q, c, 0.3, cap=2)
    assert np.bincount(rows, minlength=len(q)).max() == 2
    ranked = np.argsort(-scores, axis=1)
    for r in range(len(q)):
        n = min(2, int(want[r].sum()))
        assert set(cells[rows == r].tolist()) == set(ranked[r, :n].tolist())
    # each row's own cell is added where the gap left it out
    own = np.argmin(scores, axis=1)
    rows, cells = cells_within(q, c, 0.3, cap=90, own=own)
    got = np.zeros_like(want)
    got[rows, cells] = True
    want[np.arange(len(q)), own] = True
    assert np.array_equal(got, want)


def test_split_cells_partition_each_cell_into_smaller_ones() -> None:
    ids, x = _planted_vectors(4000)
    cells = ivf_cells(_ivf_store(ids, x, 16, "fp16"))
    assert split_cells(cells, 400) is cells  # ~250 per list: already small enough
    split = split_cells(cells, 50)
    assert 60 <= split.nlist <= 100 and split.sizes.sum() == cells.sizes.sum()
    assert split.sizes.max() < cells.sizes.max()
    seen: dict[int, np.ndarray] = {}
    for c in range(split.nlist):
        sub_ids, sub_vecs = split.get(c)
        assert len(sub_ids) == split.sizes[c]
        seen.update(zip(sub_ids.tolist(), sub_vecs, strict=True))
    parent = dict(
        kv
        for c in range(cells.nlist)
        for kv in zip(cells.get(c)[0].tolist(), cells.get(c)[1], strict=True)
    )
    assert seen.keys() == parent.keys() == set(ids.tolist())  # every item exactly once
    assert all(np.array_equal(seen[i], parent[i]) for i in parent)


def test_self_join_uses_cells_beyond_the_exact_size() -> None:
    ids, x = _planted_vectors(2500)
    store = FloatStore.create(model_id="m", dim=32)
    store.add(ids, x)
    exact, report = self_join(store, lambda: _chunks(ids, x), k=10, floor=0.8, cosine=0.9)
    assert report.method == "exact"
    cells, report = self_join(
        store, lambda: _chunks(ids, x), k=10, floor=0.8, cosine=0.9, exact_max=1000
    )
    assert report.method == "ivf" and report.nprobe < report.nlist
    assert report.recall is not None and report.recall >= 0.999
    truth = _pairs(exact)
    planted = {p for p, s in truth.items() if s >= 0.9}
    assert planted <= _pairs(cells).keys() <= truth.keys()


def test_joined_stores_answer_as_the_real_stores() -> None:
    rng = np.random.default_rng(2)
    codes = _hashes(rng, 1500)
    ids, x = _planted_vectors(1500)
    hashes = _store(codes, ids)
    join = HammingJoin(hashes)
    queries = np.r_[codes, codes ^ MIRROR]
    joined = JoinedHashes(
        hashes,
        radius=8,
        within=join.radius(queries, 8),
        knn_k=10,
        nearest=join.knn(queries, 10, 20),
    )
    for (a_ids, a_d), (b_ids, b_d) in zip(
        joined.search_radius(queries[:300], 8), hashes.search_radius(queries[:300], 8), strict=True
    ):
        assert dict(zip(a_ids.tolist(), a_d.tolist(), strict=True)) == dict(
            zip(b_ids.tolist(), b_d.tolist(), strict=True)
        )
    jd, _ji = joined.search_knn(codes[:300], 10)
    bd, _bi = hashes.search_knn(codes[:300], 10)
    assert np.array_equal(np.where(bd <= 20, bd, 65), jd)  # same distances, nearest first
    assert joined.fallbacks == 0
    joined.search_radius(codes[:5], 9)  # another radius: answered by the store itself
    assert joined.fallbacks == 5

    floats = FloatStore.create(model_id="m", dim=32)
    floats.add(ids, x)
    table, _ = self_join(floats, lambda: _chunks(ids, x), k=10, floor=0.5, cosine=0.9)
    jf = JoinedFloats(floats, table=table, k=10, floor=0.5)
    jf.expect(ids[:400], x[:400])
    js, jids = jf.search(x[:400], 10)
    bs, bids = floats.search(x[:400], 10)
    for n in range(400):  # the real answer above the floor, less the query's own item
        keep = (bs[n] >= 0.5) & (bids[n] != ids[n])
        assert jids[n][jids[n] >= 0].tolist() == bids[n][keep].tolist()
        assert np.allclose(js[n][jids[n] >= 0], bs[n][keep], atol=1e-5)
    assert jf.fallbacks == 0
    # announced hash rows: each row's own item is left out, nothing else changes
    joined.expect(ids, [codes, codes ^ MIRROR])
    for n, (a_ids, _d) in enumerate(joined.search_radius(codes, 8)):
        b_ids, _bd = hashes.search_radius(codes[n : n + 1], 8)[0]
        assert sorted(a_ids.tolist()) == sorted(set(b_ids.tolist()) - {int(ids[n])})
    _kd, ki = joined.search_knn(codes, 10)
    assert not (ki == ids[:, None]).any()
