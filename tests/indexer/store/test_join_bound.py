"""The cell join's bounded scores: the bound is never below a pair's cosine, and scoring
through it keeps exactly the pairs at the floor that the full product keeps."""

from __future__ import annotations

import numpy as np

from splitaudit.indexer.store.join_bound import bound_rows, choose_head, score_bounded
from splitaudit.indexer.store.vector_join import _above


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _isotropic(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    """Random unit vectors, a third of them near copies (cosine ~0.8-0.97) of others."""
    rng = np.random.default_rng(seed)
    x = _unit(rng.standard_normal((n, dim)))
    third = n // 3
    noise = rng.uniform(0.1, 0.5, (third, 1)) * rng.standard_normal((third, dim)) / np.sqrt(dim)
    x[:third] = _unit(x[third : 2 * third] + noise)
    return x


def _full(q: np.ndarray, v: np.ndarray, floor: float, k: int) -> dict[tuple[int, int], float]:
    scores = q @ v.T
    r, c = _above(scores, floor, k)
    return {(int(a), int(b)): float(scores[a, b]) for a, b in zip(r, c, strict=True)}


def test_bound_is_never_below_the_cosine() -> None:
    rng = np.random.default_rng(1)
    skewed = _unit(rng.standard_normal((500, 64)) * np.linspace(3, 0.1, 64))  # energy up front
    for x in (_isotropic(500), skewed, _unit(np.abs(rng.standard_normal((500, 64))))):
        for head in (8, 16, 32, 48):
            rows = bound_rows(x, head)
            assert rows.shape == (500, head + 1) and rows.flags.c_contiguous
            assert np.all(rows @ rows.T >= x @ x.T - 1e-5)


def test_bounded_scores_keep_the_pairs_of_the_full_product() -> None:
    x = _isotropic(3000)
    q, v = x[:1200], x[1200:]
    qrows = np.arange(0, 1200, 2)  # every other query row, as a cell's probing rows come
    for floor in (0.8, 0.9):
        got = score_bounded(q, bound_rows(q, 32), qrows, v, bound_rows(v, 32), floor, 10)
        assert got is not None
        r, c, s = got
        found = {(int(qrows[a]), int(b)): float(t) for a, b, t in zip(r, c, s, strict=True)}
        want = _full(q[qrows], v, floor, 10)
        want = {(int(qrows[a]), b): t for (a, b), t in want.items()}
        assert len(want) > 300  # the planted copies of the sampled rows
        assert found.keys() == want.keys()
        assert np.allclose([found[p] for p in want], list(want.values()), atol=1e-6)


def test_more_than_k_at_the_floor_keeps_each_rows_best_k() -> None:
    rng = np.random.default_rng(2)
    base = _unit(rng.standard_normal((1, 64)))
    v = _unit(base + np.linspace(0.0, 0.6, 30)[:, None] * _unit(rng.standard_normal((30, 64))))
    v = np.r_[v, _unit(rng.standard_normal((400, 64)))]
    q = np.r_[base, _unit(rng.standard_normal((60, 64)))].astype(np.float32)
    got = score_bounded(q, bound_rows(q, 32), np.arange(len(q)), v, bound_rows(v, 32), 0.8, 5)
    assert got is not None
    r, c, s = got
    exact = (q[0] @ v.T).astype(np.float32)
    at_floor = np.flatnonzero(exact >= 0.8)
    assert len(at_floor) > 5  # more than k near the first query
    assert r.tolist() == [0] * 5
    assert sorted(c.tolist()) == sorted(np.argsort(-exact)[:5].tolist())
    assert np.all(np.diff(s) <= 0)  # best first


def test_a_bound_that_lets_everything_through_hands_the_block_back() -> None:
    rng = np.random.default_rng(3)
    common = _unit(rng.standard_normal((1, 64)))
    x = _unit(common + 0.4 * rng.standard_normal((300, 64)) / 8)  # every cosine ~0.86
    rows = bound_rows(x, 32)
    assert score_bounded(x, rows, np.arange(300), x, rows, 0.8, 10) is None


def test_choose_head_splits_spread_vectors_only() -> None:
    head, costs = choose_head(_isotropic(1024), 0.8)
    assert head == 32 and costs[32] < 0.85 and costs[16] > costs[32]
    rng = np.random.default_rng(4)
    common = _unit(rng.standard_normal((1, 64)))
    close = _unit(common + 0.5 * rng.standard_normal((1024, 64)) / 8)
    assert choose_head(close, 0.8)[0] is None  # random pairs near the floor: no gain
    assert choose_head(_isotropic(1024, dim=16), 0.8) == (None, {})  # too few dimensions
