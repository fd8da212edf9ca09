"""The cell join's bounded scores: the bound is never below a pair's cosine, and scoring
through it keeps exactly the pairs at the floor that the full product keeps."""

from __future__ import annotations

import numpy as np

from splitaudit.indexer.store.join_bound import (
    TAIL_EPS,
    Split,
    choose_split,
    principal_basis,
    score_bounded,
)
from splitaudit.indexer.store.vector_join import _above


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _with_copies(x: np.ndarray, seed: int) -> np.ndarray:
    """A third of the rows replaced by near copies (cosine ~0.8-0.99) of another third."""
    rng = np.random.default_rng(seed)
    third, dim = len(x) // 3, x.shape[1]
    noise = rng.uniform(0.1, 0.5, (third, 1)) * rng.standard_normal((third, dim)) / np.sqrt(dim)
    x = x.copy()
    x[:third] = _unit(x[third : 2 * third] + noise)
    return x


def _isotropic(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    """Random unit vectors (the dedup bench's kind), with near copies."""
    return _with_copies(_unit(np.random.default_rng(seed).standard_normal((n, dim))), seed)


def _features(n: int, dim: int = 256, seed: int = 0) -> np.ndarray:
    """Image-feature-like vectors: non-negative (ReLU of a mix whose energy falls off across
    directions), a random pair's cosine ~0.3, with near copies."""
    rng = np.random.default_rng(seed)
    mix = np.linalg.qr(rng.standard_normal((dim, dim)))[0]
    z = rng.standard_normal((n, dim)) * np.geomspace(1, 0.1, dim)
    return _with_copies(_unit(np.maximum(z @ mix.T, 0) + 1e-6), seed)


def _full(q: np.ndarray, v: np.ndarray, floor: float, k: int) -> dict[tuple[int, int], float]:
    scores = q @ v.T
    r, c = _above(scores, floor, k)
    return {(int(a), int(b)): float(scores[a, b]) for a, b in zip(r, c, strict=True)}


def test_bound_is_never_below_the_cosine() -> None:
    rng = np.random.default_rng(1)
    foreign = principal_basis(_isotropic(600, seed=9))  # any orthonormal basis bounds
    for x in (
        _isotropic(500),
        _features(500, dim=64),
        _unit(np.abs(rng.standard_normal((500, 64)))),
    ):
        for basis in (principal_basis(x), foreign):
            for head in (8, 16, 32, 48):
                rows = Split(basis[:head]).rows(x)
                assert rows.shape == (500, head + 1) and rows.flags.c_contiguous
                assert np.all(rows @ rows.T >= x @ x.T - 1e-5)


def test_a_vector_inside_the_head_keeps_a_rounded_up_tail() -> None:
    basis = principal_basis(_isotropic(300))
    x = np.ascontiguousarray(basis[:4] * 0.6 + basis[1:5] * 0.8)  # unit, in the first 5 only
    rows = Split(basis[:8]).rows(x)
    assert np.all(rows[:, 8] >= np.sqrt(TAIL_EPS) * 0.99)
    assert np.all(rows @ rows.T >= x @ x.T)


def test_bounded_scores_keep_the_pairs_of_the_full_product() -> None:
    for x in (_isotropic(3000), _features(3000)):
        split, _costs = choose_split(x[:2048], 0.8)
        assert split is not None
        q, v = x[:1200], x[1200:]
        qrows = np.arange(0, 1200, 2)  # every other query row, as a cell's probing rows come
        for floor in (0.8, 0.9):
            got = score_bounded(q, split.rows(q), qrows, v, split.rows(v), floor, 10)
            assert got is not None
            r, c, s = got
            found = {(int(qrows[a]), int(b)): float(t) for a, b, t in zip(r, c, s, strict=True)}
            want = {(int(qrows[a]), b): t for (a, b), t in _full(q[qrows], v, floor, 10).items()}
            assert len(want) > 300  # the planted copies of the sampled rows
            assert found.keys() == want.keys()
            assert np.allclose([found[p] for p in want], list(want.values()), atol=1e-6)


def test_more_than_k_at_the_floor_in_one_row_are_all_kept() -> None:
    """As ``_above`` keeps them from a block that is not dense: a pair beyond a row's best k
    still joins the other item's table (the join is symmetric)."""
    rng = np.random.default_rng(2)
    base = _unit(rng.standard_normal((1, 64)))
    v = _unit(base + np.linspace(0.0, 0.6, 30)[:, None] * _unit(rng.standard_normal((30, 64))))
    v = np.r_[v, _unit(rng.standard_normal((400, 64)))]
    q = np.r_[base, _unit(rng.standard_normal((60, 64)))].astype(np.float32)
    split = Split(principal_basis(v)[:32])
    got = score_bounded(q, split.rows(q), np.arange(len(q)), v, split.rows(v), 0.8, 5)
    assert got is not None
    r, c, s = got
    want = _full(q, v, 0.8, 5)
    assert len(want) > 5 and {int(a) for a, _b in want} == {0}  # more than k near the first
    assert set(zip(r.tolist(), c.tolist(), strict=True)) == want.keys()
    assert np.allclose(s, [want[(int(a), int(b))] for a, b in zip(r, c, strict=True)], atol=1e-6)


def test_a_bound_that_lets_everything_through_hands_the_block_back() -> None:
    rng = np.random.default_rng(3)
    common = _unit(rng.standard_normal((1, 64)))
    x = _unit(common + 0.4 * rng.standard_normal((300, 64)) / 8)  # every cosine ~0.86
    split = Split(principal_basis(x)[:32])
    rows = split.rows(x)
    assert score_bounded(x, rows, np.arange(300), x, rows, 0.8, 10) is None


def test_choose_split_where_the_bound_pays() -> None:
    split, costs = choose_split(_isotropic(2048), 0.8)
    assert split is not None and split.head == 32 and costs[32] < 0.85 < costs[8]
    split, costs = choose_split(_features(2048), 0.8)
    assert split is not None and split.head <= 128 and costs[split.head] < 0.85 < costs[8]
    rng = np.random.default_rng(4)
    common = _unit(rng.standard_normal((1, 64)))
    close = _unit(common + 0.5 * rng.standard_normal((2048, 64)) / 8)
    assert choose_split(close, 0.8)[0] is None  # random pairs near the floor: no gain
    assert choose_split(_isotropic(1024, dim=16), 0.8) == (None, {})  # too few dimensions


def test_a_cheap_join_is_not_split() -> None:
    """Where each item scores few vectors (tight cells), turning the items into the basis
    would cost more than the narrower product saves."""
    sample = _isotropic(2048)
    assert choose_split(sample, 0.8, scored=5000.0)[0] is not None
    assert choose_split(sample, 0.8, scored=120.0) == (None, {})
