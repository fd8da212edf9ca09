"""Calibration of the vector self-join's probing on synthetic pairs at a given cosine.

Pairs are built at exactly the calibration cosine from sampled corpus vectors
(``pair_scores``); a pair is found when either item's probes reach the other's cell. The gap
(``calibrate_gap``), a fixed ``nprobe`` (``calibrate_nprobe``) and the two-level coarse step's
width (``calibrate_width``) are each the smallest that finds ``JOIN_RECALL`` of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.join_cells import Cells, centroid_graph

JOIN_RECALL = 0.999  # of pairs at the calibration cosine
CALIBRATION_PAIRS = 4_000

PairScores = tuple[
    npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.int64]
]


def pair_scores(
    cells: Cells, cosine: float, *, pairs: int = CALIBRATION_PAIRS, seed: int = 0
) -> PairScores:
    """Centroid scores of synthetic pairs at exactly ``cosine``: ``(sq, sv, cell_v, cell_q)``.

    Each pair is a sampled corpus vector ``v`` (in cell ``cell_v``) and a unit vector ``q`` at
    ``cosine`` to it (random direction, nearest cell ``cell_q``); ``sq`` and ``sv`` are their
    scores against every centroid.
    """
    rng = np.random.default_rng(seed)
    total = int(cells.sizes.sum())
    pos = np.sort(rng.choice(total, min(pairs, total), replace=False))
    bounds = np.cumsum(cells.sizes)
    cell_of = np.searchsorted(bounds, pos, side="right")
    offset = pos - np.r_[0, bounds][cell_of]
    v = np.empty((len(pos), cells.centroids.shape[1]), np.float32)
    for c in np.unique(cell_of).tolist():  # each cell decoded once
        at = np.flatnonzero(cell_of == c)
        v[at] = cells.get(int(c))[1][offset[at]]
    u = rng.standard_normal((len(v), v.shape[1])).astype(np.float32)
    u -= (u * v).sum(axis=1, keepdims=True) * v
    u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    q = (cosine * v + np.sqrt(max(0.0, 1.0 - cosine * cosine)) * u).astype(np.float32)
    sq, sv = q @ cells.centroids.T, v @ cells.centroids.T
    return sq, sv, cell_of.astype(np.int64), np.argmax(sq, axis=1).astype(np.int64)


def as_voronoi(scores: PairScores) -> PairScores:
    """``pair_scores`` for Voronoi cells (``join_cells.voronoi_cells``): the sampled vector is
    in the cell of its nearest centroid, like the synthetic one, not in the cell it was drawn
    from."""
    sq, sv, _cell_v, cell_q = scores
    return sq, sv, np.argmax(sv, axis=1).astype(np.int64), cell_q


def probes_per_item(scores: PairScores, gap: float) -> float:
    """The cells a corpus item probes within ``gap`` of its best, its own cell added where it
    is not among them, on average over the sampled corpus vectors of ``scores`` (the cap
    aside): what the join's coarse step will choose, from the calibration sample alone."""
    _sq, sv, cell_v, _cell_q = scores
    if not len(sv):
        return 0.0
    rows = np.arange(len(sv))
    floor = sv.max(axis=1) - gap
    within = (sv >= floor[:, None]).sum(axis=1) + (sv[rows, cell_v] < floor)
    return float(within.mean())


def pair_ranks(
    cells: Cells, cosine: float, *, pairs: int = CALIBRATION_PAIRS, seed: int = 0
) -> npt.NDArray[np.int64]:
    """For synthetic pairs at exactly ``cosine`` (``pair_scores``), the probe count each needs
    to be joined: the join finds the pair when either one's ``nprobe`` nearest cells include
    the other's cell, so the pair needs ``nprobe > rank``.
    """
    sq, sv, cell_v, cell_q = pair_scores(cells, cosine, pairs=pairs, seed=seed)
    rows = np.arange(len(sq))
    rank_q = (sq > sq[rows, cell_v][:, None]).sum(axis=1)  # v's cell among q's probes
    rank_v = (sv > sv[rows, cell_q][:, None]).sum(axis=1)  # q's cell among v's probes
    return np.minimum(rank_q, rank_v).astype(np.int64)


def calibrate_gap(
    cells: Cells,
    cosine: float,
    *,
    target: float = JOIN_RECALL,
    seed: int = 0,
    scores: PairScores | None = None,
) -> tuple[float, int, float]:
    """Adaptive probing: the smallest centroid-score ``gap`` such that probing, for each item,
    the cells scoring within ``gap`` of its best cell joins ``target`` of the pairs at
    ``cosine``; ``(gap, cap, recall)``. ``cap`` bounds the cells any item probes (1.5x the
    most any sampled vector needed). An item deep inside its cell probes one or two cells, one
    near a border more: on 1M random 64-d vectors ~half the vectors a fixed ``nprobe`` scores
    for the same recall (docs/scale.md).
    """
    sq, sv, cell_v, cell_q = scores or pair_scores(cells, cosine, seed=seed)
    if not len(sq):
        return 0.0, 1, 1.0
    rows = np.arange(len(sq))
    best_q, best_v = sq.max(axis=1), sv.max(axis=1)
    gaps = np.minimum(best_q - sq[rows, cell_v], best_v - sv[rows, cell_q])
    gap = float(np.quantile(gaps, target, method="higher"))
    within = np.r_[
        (sq >= best_q[:, None] - gap).sum(axis=1), (sv >= best_v[:, None] - gap).sum(axis=1)
    ]
    cap = min(cells.nlist, int(np.ceil(1.5 * within.max())))
    return gap, cap, float((gaps <= gap).mean())


def calibrate_nprobe(
    cells: Cells, cosine: float, *, target: float = JOIN_RECALL, seed: int = 0
) -> tuple[int, float]:
    """Smallest fixed ``nprobe`` joining ``target`` of the pairs at ``cosine``; (nprobe, recall)."""
    rank = pair_ranks(cells, cosine, seed=seed)
    need = int(np.quantile(rank, target, method="higher")) + 1 if len(rank) else 1
    nprobe = min(max(need, 1), cells.nlist)
    return nprobe, float((rank < nprobe).mean()) if len(rank) else 1.0


def gap_recall(
    cells: Cells, cosine: float, gap: float, *, seed: int = 0, voronoi: bool = False
) -> float:
    """Share of synthetic pairs at ``cosine`` that probing within ``gap`` joins (``voronoi``:
    in the Voronoi cells of the same centroids, ``as_voronoi``)."""
    scores = pair_scores(cells, cosine, seed=seed)
    sq, sv, cell_v, cell_q = as_voronoi(scores) if voronoi else scores
    if not len(sq):
        return 1.0
    rows = np.arange(len(sq))
    gaps = np.minimum(sq.max(axis=1) - sq[rows, cell_v], sv.max(axis=1) - sv[rows, cell_q])
    return float((gaps <= gap).mean())


COARSE_WIDTHS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)  # two-level widths tried


@dataclass(frozen=True)
class CoarseCalibration:
    """The two-level coarse step measured on the calibration pairs (``calibrate_width``)."""

    width: int | None  # neighbour cells per own cell; None: the full step (no width sufficed)
    recall: float  # pairs at the calibration cosine found, two-level (full step: ``full``)
    full: float
    items: int = 0  # sampled corpus vectors whose probes were compared with the full step
    differ: int = 0  # of them, those whose cells differ
    missing: int = 0  # probes of the full step the two-level one leaves out (all items)
    extra: int = 0  # probes the two-level one adds (a lower best among fewer cells)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for the join report."""
        return {k: round(v, 5) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def calibrate_width(
    cells: Cells,
    cosine: float,
    gap: float,
    *,
    target: float = JOIN_RECALL,
    seed: int = 0,
    widths: Iterable[int] = COARSE_WIDTHS,
    scores: PairScores | None = None,
) -> tuple[npt.NDArray[np.int64] | None, CoarseCalibration]:
    """The two-level coarse step's width: the smallest ``width`` for which choosing each
    item's cells within ``gap`` among the ``width`` cells nearest its own (``centroid_graph``)
    still finds ``target`` of the pairs at ``cosine`` (``calibrate_gap``'s pairs: the sampled
    vector in its own cell, the synthetic one in its nearest; the full step's share where that
    is lower); ``(graph, report)``,
    the graph cut to that width, or None (the full step) when no width up to half the cells
    does. The report compares each sampled vector's cells with the full step's. ``scores``:
    ``pair_scores(cells, cosine, seed=seed)`` already computed (``calibrate_gap``'s)."""
    sq, sv, cell_v, cell_q = scores or pair_scores(cells, cosine, seed=seed)
    nlist = cells.nlist
    tried = [w for w in widths if w <= nlist // 2]
    if not len(sq) or not tried:
        return None, CoarseCalibration(None, 1.0, 1.0)
    graph = centroid_graph(cells.centroids, max(tried))
    rows = np.arange(len(sq))
    best_q, best_v = sq.max(axis=1), sv.max(axis=1)
    full_found = (sq[rows, cell_v] >= best_q - gap) | (sv[rows, cell_q] >= best_v - gap)
    full_found |= cell_v == cell_q

    def side(
        s: npt.NDArray[np.float32], own: npt.NDArray[np.int64], other: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Per pair: the running best over the own cell's neighbours, the other's cell's
        position among them (width: absent), the other's cell's score."""
        near = graph[own]
        best = np.maximum.accumulate(s[rows[:, None], near], axis=1)
        hit = near == other[:, None]
        pos = np.where(hit.any(axis=1), hit.argmax(axis=1), near.shape[1])
        return best, pos, s[rows, other]

    bq, pq, oq = side(sq, cell_q, cell_v)
    bv, pv, ov = side(sv, cell_v, cell_q)
    full = float(full_found.mean())

    def recall_at(width: int) -> float:
        found = (pq < width) & (oq >= bq[:, width - 1] - gap)
        found |= (pv < width) & (ov >= bv[:, width - 1] - gap)
        return float((found | (cell_v == cell_q)).mean())

    # the widest first: on uniform vectors (the bench's) no width up to half the cells keeps
    # the full step's pairs (1M, 2,329 cells: 0.70 of them at 256), so the ladder is skipped
    want = min(target, full)
    widest = recall_at(tried[-1])
    if widest < want:
        return None, CoarseCalibration(None, widest, full)
    width = next(w for w in tried if recall_at(w) >= want)
    cut = np.ascontiguousarray(graph[:, :width])
    # the sampled corpus vectors' cells, two-level against full (the cap aside)
    want = sv >= (best_v - gap)[:, None]
    want[rows, cell_v] = True
    near = cut[cell_v]
    picked = sv[rows[:, None], near]
    keep = picked >= (picked.max(axis=1) - gap)[:, None]
    keep[:, 0] = True
    got = np.zeros_like(want)
    got[np.repeat(rows, width)[keep.ravel()], near[keep]] = True
    return cut, CoarseCalibration(
        width,
        recall_at(width),
        full,
        items=len(sv),
        differ=int((got != want).any(axis=1).sum()),
        missing=int((want & ~got).sum()),
        extra=int((got & ~want).sum()),
    )
