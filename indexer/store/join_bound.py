"""The cell join's scores in two parts: the leading dimensions exactly, the rest bounded.

A pair's cosine is ``q·v = q[:h]·v[:h] + q[h:]·v[h:]`` and, by Cauchy-Schwarz,
``q[h:]·v[h:] <= |q[h:]| |v[h:]|``. So one product of ``h + 1`` columns, ``[q[:h], |q[h:]|]``
against ``[v[:h], |v[h:]|]`` (``bound_rows``), gives an upper bound of every pair's cosine;
only the pairs whose bound reaches the join's floor are scored in full (``score_bounded``).
No pair at the floor is lost: the bound is never below the cosine (a margin covers float
rounding), and what survives is scored exactly.

On vectors whose energy is spread over their dimensions (the dedup bench's uniform 64-d ones:
a random pair's head product has a standard deviation of ~0.09, its tail bound is ~0.5) the
bound at a 0.80 floor lets through ~0.05% of the pairs, and a product of 33 columns costs
about half one of 64. Where the tail holds more of a random pair's cosine the bound lets
through more and gains nothing: ``choose_head`` measures the share on a sample of the corpus
and keeps the full product (``None``) unless the split costs clearly less.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MIN_DIM = 32  # below, the full product is cheap enough
THRESHOLD_SHARE = 0.36  # a block's threshold pass, as a share of a full product's cost
SURVIVOR_COST = 25.0  # a pair scored in full after the bound, in scores of a full product
MAX_COST = 0.85  # the split is used where it is estimated to cost at most this share
MARGIN = 1e-5  # float rounding of the bound's product against the exact one


def bound_rows(x: npt.NDArray[np.float32], head: int) -> npt.NDArray[np.float32]:
    """``[x[:, :head], |x[:, head:]|]``: the rows a bound product takes (float32, contiguous)."""
    out = np.empty((len(x), head + 1), np.float32)
    out[:, :head] = x[:, :head]
    tail = x[:, head:]
    out[:, head] = np.sqrt(np.einsum("ij,ij->i", tail, tail))
    return out


def split_cost(sample: npt.NDArray[np.float32], head: int, floor: float) -> float:
    """The estimated cost of the split at ``head``, as a share of the full product's: the
    narrower product plus each pair of the sample (itself aside) whose bound reaches
    ``floor``, scored in full."""
    dim = sample.shape[1]
    rows = bound_rows(sample, head)
    bound = rows @ rows.T
    np.fill_diagonal(bound, -np.inf)
    share = float(np.count_nonzero(bound >= floor - MARGIN)) / max(1, len(rows) * (len(rows) - 1))
    product = ((head + 1) / dim + THRESHOLD_SHARE) / (1 + THRESHOLD_SHARE)
    return product + SURVIVOR_COST * share


def choose_head(
    sample: npt.NDArray[np.float32], floor: float
) -> tuple[int | None, dict[int, float]]:
    """The leading dimensions the join scores exactly (the rest bounded), or None for the full
    product; and the estimated cost of each width tried (``split_cost``)."""
    dim = sample.shape[1]
    if dim < MIN_DIM or len(sample) < 2:
        return None, {}
    costs = {h: round(split_cost(sample, h, floor), 4) for h in (dim // 4, 3 * dim // 8, dim // 2)}
    head = min(costs, key=lambda h: costs[h])
    return (head if costs[head] <= MAX_COST else None), costs


def score_bounded(
    q: npt.NDArray[np.float32],
    q_bound: npt.NDArray[np.float32],
    qrows: npt.NDArray[np.int64],
    vecs: npt.NDArray[np.float32],
    v_bound: npt.NDArray[np.float32],
    floor: float,
    k: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
    """(n, column, cosine) of the pairs of rows ``qrows`` of ``q`` (the n-th of them) and
    ``vecs`` at or above ``floor``, at most the best ``k`` per row, from the bound product of
    ``q_bound[qrows]`` x ``v_bound`` (``bound_rows`` of ``q`` and ``vecs``); None where the
    bound lets through more than ``k`` pairs per row on average (the caller scores that block
    in full)."""
    bound = q_bound[qrows] @ v_bound.T
    hits = np.flatnonzero(bound >= floor - MARGIN)
    if len(hits) > k * len(qrows):
        return None
    r, c = np.divmod(hits, bound.shape[1])
    scores = np.einsum("ij,ij->i", q[qrows[r]], vecs[c]).astype(np.float32)
    keep = scores >= floor
    r, c, scores = r[keep], c[keep], scores[keep]
    if len(r) > k and np.bincount(r).max() > k:  # rare: more than k at the floor in one row
        order = np.lexsort((-scores, r))
        r, c, scores = r[order], c[order], scores[order]
        start = np.searchsorted(r, r, side="left")
        first = np.arange(len(r)) - start < k
        r, c, scores = r[first], c[first], scores[first]
    return r.astype(np.int64), c.astype(np.int64), scores
