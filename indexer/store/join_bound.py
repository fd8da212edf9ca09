"""The cell join's scores in two parts: the leading directions exactly, the rest bounded.

In an orthonormal basis ``B`` (rows: a corpus sample's principal directions, most energy
first), a pair's cosine is ``q·v = (Bq)[:h]·(Bv)[:h] + (Bq)[h:]·(Bv)[h:]`` and, by
Cauchy-Schwarz, the second part is at most ``|(Bq)[h:]| |(Bv)[h:]|``. So one product of
``h + 1`` columns, ``[(Bq)[:h], |(Bq)[h:]|]`` against the same of ``v`` (``Split.rows``),
bounds every pair's cosine from above; only the pairs whose bound reaches the join's floor
are scored in full, on the vectors as stored (``score_bounded``). No pair at the floor is
lost: the bound is never below the cosine (the tail norms are rounded up, a margin covers the
product's rounding), and what passes is scored exactly.

How much the bound lets through depends on how much of a random pair's cosine lies in the
tail. On the dedup bench's uniform 64-d vectors, 32 directions: ~0.05% of the pairs at a 0.80
floor, for a product of 33 columns instead of 64. On image-model features (non-negative, a
random pair's cosine ~0.25 and most of the energy in a few directions) the principal
directions carry it. ``choose_split`` fits the basis on half a corpus sample, measures the
cost of each width on the other half, and keeps the full product (``None``) unless the
split costs clearly less.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MIN_DIM = 32  # below, the full product is cheap enough
MIN_SCORED = 500  # vectors scored per item below which the join is cheap enough as it is
THRESHOLD_SHARE = 0.36  # a block's threshold pass, as a share of a full product's cost
SURVIVOR_COST = 25.0  # a pair scored in full after the bound, in scores of a full product
MAX_COST = 0.85  # the split is used where it is estimated to cost at most this share
MARGIN = 1e-5  # float rounding of the bound's product against the exact one
TAIL_EPS = 1e-5  # added to a squared tail norm: covers its float32 rounding (~1e-6)


@dataclass(frozen=True)
class Split:
    """The leading ``head`` directions of ``basis`` scored exactly, the rest bounded."""

    basis: npt.NDArray[np.float32]  # (head, dim), orthonormal rows

    @property
    def head(self) -> int:
        """Directions scored exactly."""
        return int(self.basis.shape[0])

    def rows(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``[(Bx)[:h], |(Bx)[h:]|]`` of each row of ``x`` (float32, contiguous); the tail
        norm from ``|x|^2 - |(Bx)[:h]|^2``, rounded up."""
        out = np.empty((len(x), self.head + 1), np.float32)
        head = out[:, : self.head]
        np.matmul(x, self.basis.T, out=head)
        tail = np.einsum("ij,ij->i", x, x) - np.einsum("ij,ij->i", head, head)
        out[:, self.head] = np.sqrt(np.maximum(tail, 0.0) + TAIL_EPS)
        return out


def principal_basis(sample: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The eigenvectors of ``sample``'s second-moment matrix as rows, most energy first."""
    x = np.asarray(sample, np.float64)
    _values, vectors = np.linalg.eigh(x.T @ x)
    return np.ascontiguousarray(vectors[:, ::-1].T, dtype=np.float32)


def split_cost(split: Split, sample: npt.NDArray[np.float32], floor: float) -> float:
    """The estimated cost of ``split``, as a share of the full product's: the narrower product
    plus each pair of ``sample`` (itself aside) whose bound reaches ``floor``, scored in full."""
    rows = split.rows(sample)
    bound = rows @ rows.T
    np.fill_diagonal(bound, -np.inf)
    share = float(np.count_nonzero(bound >= floor - MARGIN)) / max(1, len(rows) * (len(rows) - 1))
    product = ((split.head + 1) / sample.shape[1] + THRESHOLD_SHARE) / (1 + THRESHOLD_SHARE)
    return product + SURVIVOR_COST * share


def choose_split(
    sample: npt.NDArray[np.float32], floor: float, scored: float | None = None
) -> tuple[Split | None, dict[int, float]]:
    """The split the join bounds its scores with, or None for the full product; and the
    estimated cost of each width tried (``split_cost``): the basis fitted on every other row
    of ``sample``, the cost measured on the rest. ``scored``: the vectors each item is
    expected to score (``join_calibrate.expected_scored``); turning an item into the basis
    (as a query and as a cell's vector: ``2 * width`` products) is counted against them (on
    image features the cells are tight, ~100 vectors scored per item, and it would cost more
    than the narrower product saves; under ``MIN_SCORED`` nothing is fitted)."""
    dim = sample.shape[1]
    if dim < MIN_DIM or len(sample) < 4 or (scored is not None and scored < MIN_SCORED):
        return None, {}
    held_out = np.ascontiguousarray(sample[1::2], np.float32)
    # the bound lets through at least the pairs truly at the floor: where they alone cost
    # more than the split can save, no basis is fitted (1.4 CPU-s at 1280-d)
    exact = held_out @ held_out.T
    np.fill_diagonal(exact, -np.inf)
    at_floor = float(np.count_nonzero(exact >= floor)) / max(1, len(exact) * (len(exact) - 1))
    if SURVIVOR_COST * at_floor + THRESHOLD_SHARE / (1 + THRESHOLD_SHARE) > MAX_COST:
        return None, {}
    basis = principal_basis(sample[0::2])
    widths = [w for w in (8, 16, 32, 64, 128, 256, 512) if w <= dim // 2]
    turn = 2.0 / scored if scored else 0.0
    costs = {w: round(split_cost(Split(basis[:w]), held_out, floor) + turn * w, 4) for w in widths}
    width = min(costs, key=lambda w: costs[w])
    if costs[width] > MAX_COST:
        return None, costs
    return Split(np.ascontiguousarray(basis[:width])), costs


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
    ``vecs`` at or above ``floor``, from the bound product of ``q_bound[qrows]`` x ``v_bound``
    (``Split.rows`` of ``q`` and ``vecs``): every one of them, as ``vector_join._above`` keeps
    them from a block that is not dense. None where the bound lets through more than ``k``
    pairs per row on average: the caller scores that block in full (where ``_above`` may keep
    only each row's best ``k``), so both ways keep the same pairs."""
    bound = q_bound[qrows] @ v_bound.T
    hits = np.flatnonzero(bound >= floor - MARGIN)
    if len(hits) > k * len(qrows):
        return None
    r, c = np.divmod(hits, bound.shape[1])
    scores = np.einsum("ij,ij->i", q[qrows[r]], vecs[c]).astype(np.float32)
    keep = scores >= floor
    return r[keep].astype(np.int64), c[keep].astype(np.int64), scores[keep]
