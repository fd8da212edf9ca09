"""The low-resolution alignment's coarse step for every candidate of a query at once.

``splitaudit.indexer.match.low_res_align`` starts each small pair by matching the reference's
band-passed central window against the query band-passed at nine scales (normalised
cross-correlation, OpenCV's ``TM_CCOEFF_NORMED``), keeping the best position whose centre
lies within ``MAX_OFFSET`` of the query's. Done pair by pair, that is nine ``matchTemplate``
calls and their masks per pair and orientation: ~0.4 ms, where a thumbnail's candidates are
50-60 and ~95% of them stop at this step (a dedup of 3,000 real thumbnails: 140 of its 512
CPU-s). Here the query's allowed windows at every scale are cut out once, centred and their
norms taken (``CoarseWindows``); a stack of references' templates is then scored against all
of them in one matrix product. The values are OpenCV's formula (the template's mean drops
out against a zero-mean template), in float32 like OpenCV's, and the best position is the
first in (scale, row, column) order, as the pair-by-pair search kept it; a flat window scores
0 and a flat template matches nothing (``FLAT_NORM``), where OpenCV's rounding gave any value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

_EPS = 1e-6
# A window whose centred norm is under this (band-pass units, gray levels: an RMS of 5e-4 over
# 400 px) is flat: it scores 0, and a flat template matches nothing. The correlation there is a
# ratio of two rounding errors: OpenCV's scored such windows of a plain sky 0.65-1.0 against
# unrelated thumbnails (pairs the refinement then spent ~10 ms each on).
FLAT_NORM = 1e-2


@dataclass(frozen=True)
class CoarseWindows:
    """A query's windows the coarse step may match: one row per (scale, y, x) position."""

    centred: npt.NDArray[np.float32]  # (m, window**2) windows minus their mean
    norms: npt.NDArray[np.float32]  # (m,) each centred window's norm
    scale: npt.NDArray[np.float64]  # (m,) the scale the window was cut at
    x: npt.NDArray[np.int64]  # (m,) the window's column in the padded band
    y: npt.NDArray[np.int64]  # (m,) and its row


@dataclass(frozen=True)
class CoarseMatches:
    """The best coarse match of each reference: correlation, scale and padded-band position."""

    score: npt.NDArray[np.float32]  # (n,) -2 where no window may match (or the template is flat)
    scale: npt.NDArray[np.float64]
    x: npt.NDArray[np.int64]
    y: npt.NDArray[np.int64]


def coarse_windows(
    bands: Sequence[tuple[float, npt.NDArray[np.float32]]],
    *,
    window: int,
    pad: int,
    side: int,
    max_offset: float,
) -> CoarseWindows:
    """The windows of each (scale, padded band) whose centre lands within ``max_offset`` of the
    side of the query's centre, in query pixels (as the pair-by-pair search allowed them)."""
    centred, norms, scales, xs, ys = [], [], [], [], []
    for s, band in bands:
        positions = band.shape[0] - window + 1
        offsets = (np.arange(positions) - pad + window / 2) / s - side / 2
        near = np.flatnonzero(np.abs(offsets) <= max_offset * side)
        if not len(near):
            continue
        views = sliding_window_view(band, (window, window))[near[:, None], near[None, :]]
        rows = views.reshape(-1, window * window).astype(np.float32)
        rows -= rows.mean(axis=1, keepdims=True)
        centred.append(rows)
        norms.append(np.sqrt(np.einsum("ij,ij->i", rows, rows)))
        scales.append(np.full(len(rows), s))
        ys.append(np.repeat(near, len(near)))
        xs.append(np.tile(near, len(near)))
    if not centred:
        empty = np.zeros(0, np.int64)
        return CoarseWindows(
            np.zeros((0, window * window), np.float32),
            np.zeros(0, np.float32),
            np.zeros(0),
            empty,
            empty,
        )
    return CoarseWindows(
        np.concatenate(centred),
        np.concatenate(norms),
        np.concatenate(scales),
        np.concatenate(xs).astype(np.int64),
        np.concatenate(ys).astype(np.int64),
    )


def coarse_matches(windows: CoarseWindows, templates: npt.NDArray[np.float32]) -> CoarseMatches:
    """Each (window, window) template's best normalised cross-correlation over ``windows``."""
    n = len(templates)
    flat = templates.reshape(n, -1).astype(np.float64)
    flat -= flat.mean(axis=1, keepdims=True)
    template_norms = np.sqrt((flat * flat).sum(axis=1))
    if not len(windows.norms) or not n:
        return CoarseMatches(
            np.full(n, -2.0, np.float32),
            np.ones(n),
            np.zeros(n, np.int64),
            np.zeros(n, np.int64),
        )
    products = windows.centred @ flat.astype(np.float32).T  # (m, n)
    bound = windows.norms[:, None] * template_norms[None, :].astype(np.float32)
    # OpenCV's guard for a (near) flat window: |r| < 1 as computed, +-1 just past it, else 0
    bound[windows.norms < FLAT_NORM] = 0.0  # a flat template's column is overwritten below
    scores = np.where(
        np.abs(products) < bound,
        products / np.maximum(bound, np.float32(_EPS)),
        np.where(np.abs(products) < bound * 1.125, np.sign(products), 0.0),
    ).astype(np.float32)
    best = np.argmax(scores, axis=0)
    picked = np.where(template_norms < FLAT_NORM, -2.0, scores[best, np.arange(n)]).astype(
        np.float32
    )
    return CoarseMatches(picked, windows.scale[best], windows.x[best], windows.y[best])
