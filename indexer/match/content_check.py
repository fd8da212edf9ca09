"""Does a geometric fit rest on shared *content*, or only on a shared overlay?

SIFT + RANSAC (``splitaudit.indexer.match.geometry``) finds any rigid set of shared pixels: the
photo itself, but also a watermark tiled over two different photos, one shop logo, the same
meme caption bands, one decorative frame, one window's chrome. What tells them apart is
everything *around* the inliers: once the test image is aligned onto the corpus image by the
fitted transform, a copy agrees almost everywhere, two photos under one overlay agree only on
the overlay.

``content_agreement`` measures that: both images are resampled onto one comparison grid
over the overlap (``GRID_SIDE`` px on the long side, blurred first so that thin strokes of
text and fine patterns weigh little against the photo's own structure), the grid is cut into
cells of ``CELL`` px, and each cell with texture in either image counts as agreeing when the
normalised cross-correlation of the two patches is at least ``CELL_NCC``. The score is the
share of textured cells that agree; ``MIN_AGREEMENT`` decides (docs/thresholds.md, "Overlays
and insets": measured side by side with inlier coverage on the overlay family of
``bench.accuracy``). The agreeing cells' bounding box is the *content region* the evidence
names. A refused fit at the identity alignment whose inliers sit in a part of the image
(``geometry.GeometricMatch.support``) is a fit on a shared overlay: the pair is then not near
by any rule (the hash and the verifier were fooled by the same overlay;
``Thresholds.near_mask``), unless the coarse layouts agree (``SAME_LAYOUT``: a darkened copy).

A semi-transparent overlay tiled over two *smooth* photos (a stock watermark over sky, a cell
culture, the moon) is most of their texture: its strokes agree cell by cell and the check
passes. What differs is under the strokes: the photos' own brightness. ``agreeing_layout``
is the rank correlation of the agreeing cells' means (Spearman: robust to a brightness or
contrast change); a copy's agreeing cells keep its brightness layout (>= 0.92 for 98% of the
copies in the overlay family), two photos under one watermark do not (<= 0.81).
``GeometricMatch.on_template`` refuses a fit at the identity alignment whose agreeing cells
disagree so (``AGREEING_LAYOUT``), and below ``TEXTURE_VETO`` the refusal vetoes the pair's
other near rules too (the watermark also dominates the two thumbnails the verifier compares).

Pixels are kept per image at ``CONTENT_SIDE`` px on the long side (``content_pixels``), from the
grayscale working image the keypoints are detected on: a few KiB beside each image's keypoints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

CONTENT_SIDE = 192  # long side, px, of the pixels kept for the check
GRID_SIDE = 96  # long side, px, of the comparison grid over the overlap
CELL = 12  # comparison cell side, px of the grid
CELL_NCC = 0.6  # a cell agrees when its patches correlate at least this much
FLAT_STD = 3.0  # gray levels: a patch flatter than this in both images carries no evidence
MIN_AGREEMENT = 0.55  # share of the textured cells that must agree
# the pixel verifier's zooms, where two images are compared whole: slight, none, inside a border
WHOLE_SCALES = (0.9, 1.0, 1.2, 1.45)
# Correlation of the cell means (the coarse brightness layout) from which a refused fit is no
# evidence of an overlay: a darkened or faded copy loses texture in many cells (they stop
# agreeing) but keeps its layout exactly (r 0.99999 in bench.accuracy); one window's chrome
# around two photos reaches 0.99 (it dominates the layout).
SAME_LAYOUT = 0.999
MIN_CELLS = 6  # fewer textured cells than this: too little to refuse a fit on
# Spearman correlation of the agreeing cells' means below which their agreement is texture
# drawn over different photos (a tiled watermark over two smooth photos), docs/thresholds.md.
AGREEING_LAYOUT = 0.85
# ... and below which the fit is evidence of the overlay, enough to overrule the thumbnail rules
# (the pixel verifier, the hashes: on smooth photos the watermark dominates their thumbnails).
TEXTURE_VETO = 0.5
# Cells across (rows or columns) from which the outermost cells on a side where the test image
# goes on past the corpus image (an inset) are left out: 7 of the 9 insets bench.recall still
# missed (grayscale photos with dark borders on a bright page) were refused on that ring alone.
RING_FROM = 4
# Points per side of the grid a perspective fit's overlap is found on (``covered``): the box is
# then within 1/64 of the reference's side of the exact one.
COVER_GRID = 65

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class ContentAgreement:
    """How much of the aligned overlap agrees, and where."""

    score: float  # agreeing / textured cells (1.0 when too few cells to judge)
    cells: int  # textured cells compared
    agreeing: int
    region: Box  # agreeing cells' bounding box, fractions of the corpus image
    outside: float | None = None  # the same share among the cells holding no inlier
    layout: float | None = None  # correlation of the cell means (coarse brightness layout)
    # rank correlation of the agreeing cells' means (None: fewer than MIN_CELLS or flat)
    agreeing_layout: float | None = None

    @property
    def passed(self) -> bool:
        """Whether the fit rests on content (enough of the overlap agrees)."""
        return self.cells < MIN_CELLS or self.score >= MIN_AGREEMENT

    @property
    def overlay(self) -> bool:
        """Whether the refusal is evidence of a shared overlay: too little of the overlap agrees
        and the coarse layouts differ too (a darkened copy keeps its layout). Then no rule may
        call the pair near (``GeometricMatch.support``, ``Thresholds``)."""
        return not self.passed and (self.layout is None or self.layout < SAME_LAYOUT)

    @property
    def texture_only(self) -> bool:
        """Whether the agreeing cells agree in texture only: their brightness layouts differ
        (``AGREEING_LAYOUT``), as two photos under one semi-transparent overlay do."""
        return self.agreeing_layout is not None and self.agreeing_layout < AGREEING_LAYOUT

    @property
    def texture_overlay(self) -> bool:
        """Whether the agreeing cells' layouts are so unlike (``TEXTURE_VETO``) that the shared
        texture is an overlay over different photos, whatever their thumbnails say."""
        return self.agreeing_layout is not None and self.agreeing_layout < TEXTURE_VETO

    def reason(self) -> str:
        """Why a refused fit was refused, in words (the evidence's ``discarded.reason``)."""
        if self.passed and self.texture_only:
            assert self.agreeing_layout is not None
            return (
                f"overlay: the {self.agreeing} agreeing cells agree in texture only (their "
                f"brightness layouts correlate {self.agreeing_layout:.2f} < {AGREEING_LAYOUT}): "
                "a semi-transparent overlay over different photos"
            )
        return (
            f"overlay: {self.agreeing} of {self.cells} textured cells of the aligned images "
            f"agree (< {MIN_AGREEMENT:.0%}); the matched keypoints sit on a shared overlay"
        )

    def evidence(self) -> dict[str, Any]:
        """JSON evidence: the agreeing share (all textured cells, those away from the inliers),
        the layout correlation and the content region on the corpus image."""
        ev: dict[str, Any] = {
            "agreement": round(self.score, 3),
            "cells": self.cells,
            "region": [round(v, 4) for v in self.region],
        }
        if self.outside is not None:
            ev["agreement_away_from_inliers"] = round(self.outside, 3)
        if self.layout is not None:
            ev["layout"] = round(self.layout, 3)
        if self.agreeing_layout is not None:
            ev["agreeing_layout"] = round(self.agreeing_layout, 3)
        return ev


def _cv2() -> Any:
    import cv2

    return cv2


def project(transform: npt.NDArray[np.float64], points: npt.NDArray[np.float64]) -> Any:
    """``points`` (n x 2) mapped by ``transform``: 2 x 3 (affine) or 3 x 3 (perspective)."""
    moved = np.hstack([points, np.ones((len(points), 1))]) @ np.asarray(transform).T
    if moved.shape[1] == 3:
        return moved[:, :2] / moved[:, 2:]
    return moved


def content_pixels(gray: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """``gray`` (an image's working grayscale) at ``CONTENT_SIDE`` px on the long side."""
    height, width = gray.shape
    scale = CONTENT_SIDE / max(width, height)
    if scale >= 1.0:
        return np.ascontiguousarray(gray)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    out: npt.NDArray[np.uint8] = _cv2().resize(gray, size, interpolation=_cv2().INTER_AREA)
    return out


def _overlap(
    transform: npt.NDArray[np.float64], query_size: tuple[int, int], reference_size: tuple[int, int]
) -> Box | None:
    """The bounding box (reference working px) of the query's footprint inside the reference."""
    if _projective(transform):
        return covered(transform, query_size, reference_size)
    qw, qh = query_size
    mapped = project(transform, np.array([[0, 0], [qw, 0], [qw, qh], [0, qh]], np.float64))
    rw, rh = reference_size
    x0, y0 = max(0.0, float(mapped[:, 0].min())), max(0.0, float(mapped[:, 1].min()))
    x1, y1 = min(float(rw), float(mapped[:, 0].max())), min(float(rh), float(mapped[:, 1].max()))
    if x1 - x0 < 4 or y1 - y0 < 4:
        return None
    return (x0, y0, x1, y1)


def _sample(
    pixels: npt.NDArray[np.uint8],
    grid_to_working: npt.NDArray[np.float64],
    working_width: int,
    grid_size: tuple[int, int],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """``pixels`` (an image kept at content size) resampled on the grid, and where it is
    defined. ``grid_to_working`` maps grid px to the image's working px."""
    cv2 = _cv2()
    scale = pixels.shape[1] / working_width  # working px -> content px
    if grid_to_working.shape == (3, 3):  # a perspective map: its scale at the grid's centre
        to_pixels = np.diag([scale, scale, 1.0]) @ grid_to_working
        cx, cy = grid_size[0] / 2, grid_size[1] / 2
        moved = project(to_pixels, np.array([[cx, cy], [cx + 1.0, cy]], np.float64))
        step = float(np.hypot(*(moved[1] - moved[0])))
    else:
        to_pixels = grid_to_working * scale
        step = math.hypot(to_pixels[0, 0], to_pixels[1, 0])
    # Source px per grid px: blur away what the grid cannot hold (no aliasing of fine text).
    source = pixels.astype(np.float32)
    if step > 1.2:
        source = cv2.GaussianBlur(source, (0, 0), 0.5 * step)
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    warp = cv2.warpPerspective if to_pixels.shape == (3, 3) else cv2.warpAffine
    out = warp(source, to_pixels, grid_size, flags=flags, borderValue=0.0)
    ones = np.ones(pixels.shape, np.float32)
    valid = warp(ones, to_pixels, grid_size, flags=flags, borderValue=0.0)
    return out, valid


def content_agreement(
    query_pixels: npt.NDArray[np.uint8],
    query_size: tuple[int, int],
    reference_pixels: npt.NDArray[np.uint8],
    reference_size: tuple[int, int],
    transform: npt.NDArray[np.float64],
    inliers: npt.NDArray[np.float32] | None = None,
) -> ContentAgreement | None:
    """Agreement of the query aligned onto the reference by ``transform`` (2 x 3, or 3 x 3 for
    a perspective fit: query working px -> reference working px); ``*_size`` are the working
    sizes (width, height). None when the transform leaves no overlap. ``inliers``: the fit's
    inlier points (reference working px), for the share among the cells holding none
    (``outside``)."""
    box = _overlap(transform, query_size, reference_size)
    if box is None:
        return None
    x0, y0, x1, y1 = box
    k = GRID_SIDE / max(x1 - x0, y1 - y0)  # grid px per reference working px
    gw, gh = max(CELL, round((x1 - x0) * k)), max(CELL, round((y1 - y0) * k))
    grid_to_reference = np.array([[1 / k, 0, x0], [0, 1 / k, y0]], np.float64)
    ref, _ = _sample(reference_pixels, grid_to_reference, reference_size[0], (gw, gh))
    square = transform if transform.shape == (3, 3) else np.vstack([transform, [0.0, 0.0, 1.0]])
    grid_to_query = np.linalg.inv(square) @ np.vstack([grid_to_reference, [0.0, 0.0, 1.0]])
    if transform.shape != (3, 3):
        grid_to_query = grid_to_query[:2]  # an affine map stays 2 x 3 (``_sample`` warps it so)
    qry, valid = _sample(query_pixels, grid_to_query, query_size[0], (gw, gh))
    occupied = np.zeros((0, 2), np.intp)  # (column, row) of the cells holding an inlier
    if inliers is not None and len(inliers):
        occupied = ((np.asarray(inliers, np.float64) - [x0, y0]) * k // CELL).astype(np.intp)
    beyond = _query_beyond(transform, query_size, reference_size, CELL / (2 * k))
    return _cell_agreement(qry, ref, valid, box, reference_size, occupied, beyond)


def _query_beyond(
    transform: npt.NDArray[np.float64],
    query_size: tuple[int, int],
    reference_size: tuple[int, int],
    margin: float,
) -> tuple[bool, bool, bool, bool]:
    """On which sides (left, top, right, bottom) the aligned query goes on past the reference
    by more than ``margin`` reference px: the corpus image sits *inside* the test image there
    (an inset in a screenshot, a photo on a page). The query's samples in the overlap's
    outermost cells on such a side mix in what surrounds the inset (interpolation, and a fit
    a pixel or two off), a step from the photo's border to the page that the corpus image
    does not have: those cells say nothing about the content (``_cell_agreement``)."""
    if _projective(transform):
        return _query_beyond_in_perspective(transform, query_size, reference_size, margin)
    qw, qh = query_size
    mapped = project(transform, np.array([[0, 0], [qw, 0], [qw, qh], [0, qh]], np.float64))
    rw, rh = reference_size
    return (
        float(mapped[:, 0].min()) < -margin,
        float(mapped[:, 1].min()) < -margin,
        float(mapped[:, 0].max()) > rw + margin,
        float(mapped[:, 1].max()) > rh + margin,
    )


def _projective(transform: npt.NDArray[np.float64]) -> bool:
    """Whether ``transform`` is a homography with a perspective part (not an affine map
    written as 3 x 3)."""
    return transform.shape == (3, 3) and bool(np.any(transform[2, :2] != 0.0))


def covered(
    homography: npt.NDArray[np.float64],
    query_size: tuple[int, int],
    reference_size: tuple[int, int],
) -> Box | None:
    """The bounding box (reference working px) of the reference's points that ``homography``
    (query -> reference) has on the query: a grid of ``COVER_GRID`` x ``COVER_GRID`` points,
    mapped back onto the query (mapping the query's corners forward would divide by the
    homography's depth, which changes sign past its horizon). None when under 4 px."""
    rw, rh = reference_size
    u, v = np.meshgrid(np.linspace(0, rw, COVER_GRID), np.linspace(0, rh, COVER_GRID))
    grid = np.stack([u.ravel(), v.ravel()], axis=1)
    on_query = _on_query(homography, grid, query_size)
    if not on_query.any():
        return None
    x0, y0 = grid[on_query].min(axis=0)
    x1, y1 = grid[on_query].max(axis=0)
    if x1 - x0 < 4 or y1 - y0 < 4:
        return None
    return (float(x0), float(y0), float(x1), float(y1))


def _on_query(
    homography: npt.NDArray[np.float64],
    points: npt.NDArray[np.float64],
    query_size: tuple[int, int],
) -> npt.NDArray[np.bool_]:
    """Which reference ``points`` the homography's inverse puts on the query (in front of the
    camera: a point past the homography's horizon is on no image)."""
    moved = np.hstack([points, np.ones((len(points), 1))]) @ np.linalg.inv(homography).T
    ahead = moved[:, 2] > 0
    depth = np.where(ahead, moved[:, 2], 1.0)
    x, y = moved[:, 0] / depth, moved[:, 1] / depth
    qw, qh = query_size
    return np.asarray(ahead & (x >= 0) & (x <= qw) & (y >= 0) & (y <= qh))


def _query_beyond_in_perspective(
    homography: npt.NDArray[np.float64],
    query_size: tuple[int, int],
    reference_size: tuple[int, int],
    margin: float,
) -> tuple[bool, bool, bool, bool]:
    """``_query_beyond`` for a homography: on a side, the query goes on past the reference by
    ``margin`` reference px when the reference's edge moved out by ``margin`` lies on the
    query all along (sampled at ``COVER_GRID`` points)."""
    rw, rh = reference_size
    along_x, along_y = np.linspace(0, rw, COVER_GRID), np.linspace(0, rh, COVER_GRID)
    edges = (
        np.stack([np.full(COVER_GRID, -margin), along_y], axis=1),  # left
        np.stack([along_x, np.full(COVER_GRID, -margin)], axis=1),  # top
        np.stack([np.full(COVER_GRID, rw + margin), along_y], axis=1),  # right
        np.stack([along_x, np.full(COVER_GRID, rh + margin)], axis=1),  # bottom
    )
    left, top, right, bottom = (
        bool(_on_query(homography, edge, query_size).all()) for edge in edges
    )
    return left, top, right, bottom


def _cells(grid: npt.NDArray[np.float32], rows: int, cols: int) -> npt.NDArray[np.float32]:
    """The grid cut into (rows, cols, CELL * CELL) cells."""
    cut = grid[: rows * CELL, : cols * CELL].reshape(rows, CELL, cols, CELL)
    return cut.transpose(0, 2, 1, 3).reshape(rows, cols, CELL * CELL)


def _cell_agreement(
    qry: npt.NDArray[np.float32],
    ref: npt.NDArray[np.float32],
    valid: npt.NDArray[np.float32],
    box: Box,
    reference_size: tuple[int, int],
    occupied: npt.NDArray[np.intp],
    beyond: tuple[bool, bool, bool, bool] = (False, False, False, False),
) -> ContentAgreement:
    """Per-cell normalised cross-correlation of the two resampled grids (all cells at once).
    ``beyond``: the sides (left, top, right, bottom) whose outermost cells are left out
    because the query goes on past the reference there (``_query_beyond``)."""
    gh, gw = ref.shape
    rows, cols = gh // CELL, gw // CELL
    a = _cells(qry, rows, cols)
    b = _cells(ref, rows, cols)
    # the query covers the whole cell
    covered: npt.NDArray[np.bool_] = np.asarray((_cells(valid, rows, cols) >= 0.99).all(axis=2))
    left, top, right, bottom = beyond
    if cols >= RING_FROM:
        covered[:, 0] &= not left
        covered[:, -1] &= not right
    if rows >= RING_FROM:
        covered[0, :] &= not top
        covered[-1, :] &= not bottom
    means_a, means_b = a.mean(axis=2), b.mean(axis=2)
    layout = _layout(means_a[covered], means_b[covered])
    a = a - a.mean(axis=2, keepdims=True)
    b = b - b.mean(axis=2, keepdims=True)
    sa = np.sqrt((a * a).mean(axis=2))
    sb = np.sqrt((b * b).mean(axis=2))
    textured = covered & ((sa >= FLAT_STD) | (sb >= FLAT_STD))
    agree = textured & (sa >= FLAT_STD) & (sb >= FLAT_STD)
    agree &= (a * b).mean(axis=2) >= CELL_NCC * sa * sb
    empty = np.ones((rows, cols), bool)
    inside = (
        (occupied[:, 0] >= 0)
        & (occupied[:, 0] < cols)
        & (occupied[:, 1] >= 0)
        & (occupied[:, 1] < rows)
    )
    empty[occupied[inside, 1], occupied[inside, 0]] = False
    n_textured, n_agreeing = int(textured.sum()), int(agree.sum())
    n_empty = int((textured & empty).sum())
    x0, y0, x1, y1 = box
    rw, rh = reference_size
    region: Box = (0.0, 0.0, 0.0, 0.0)
    if n_agreeing:
        rs, cs = np.nonzero(agree)
        sx, sy = (x1 - x0) / gw, (y1 - y0) / gh
        region = (
            (x0 + int(cs.min()) * CELL * sx) / rw,
            (y0 + int(rs.min()) * CELL * sy) / rh,
            (x0 + (int(cs.max()) + 1) * CELL * sx) / rw,
            (y0 + (int(rs.max()) + 1) * CELL * sy) / rh,
        )
    score = n_agreeing / n_textured if n_textured else 1.0
    outside = int((agree & empty).sum()) / n_empty if n_empty >= MIN_CELLS else None
    return ContentAgreement(
        score=score,
        cells=n_textured,
        agreeing=n_agreeing,
        region=region,
        outside=outside,
        layout=layout,
        agreeing_layout=_rank_correlation(means_a[agree], means_b[agree]),
    )


def _layout(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float | None:
    """Pearson r of the two images' cell means over the covered cells (their coarse brightness
    layout), None when too few cells or either is flat."""
    if len(a) < MIN_CELLS:
        return None
    a = a - a.mean()
    b = b - b.mean()
    norm = float(np.sqrt((a * a).sum() * (b * b).sum()))
    if norm < (FLAT_STD**2) * len(a):
        return None
    return float((a * b).sum()) / norm


def _rank_correlation(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float | None:
    """Spearman's rank correlation of two series (ties: average ranks), None when shorter than
    ``MIN_CELLS`` or either is constant."""
    if len(a) < MIN_CELLS:
        return None
    ra, rb = _ranks(a), _ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    norm = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    if norm == 0.0:
        return None
    return float((ra * rb).sum()) / norm


def _ranks(values: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Ranks from 0, ties sharing their average rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.arange(len(values), dtype=np.float64)
    if np.any(np.diff(values[order]) == 0):  # rare for cell means: average the tied ranks
        _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        ends = np.cumsum(counts)
        ranks = (ends - (counts + 1) / 2.0)[inverse.ravel()].astype(np.float64)
    return ranks


FLAT_MEAN = 8.0  # gray levels: two flat patches agree when their means are this close


@dataclass(frozen=True)
class ThreeWay:
    """A test image aligned with two corpus images A and B (``three_way``): the cells where A
    and B differ, and how many of those the test image agrees with A, with B, with either."""

    differing: int
    with_a: int
    with_b: int
    with_either: int

    @property
    def neither(self) -> float:
        """Share of the differing cells where the test image agrees with neither (0.0 when
        there are none)."""
        if not self.differing:
            return 0.0
        return 1.0 - self.with_either / self.differing


def _agree(x: npt.NDArray[np.float32], y: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    """Per cell (rows, cols, CELL * CELL): both textured and correlated (``CELL_NCC``), or both
    flat with close means (``FLAT_MEAN``): the cells' content is the same."""
    mx, my = x.mean(axis=2), y.mean(axis=2)
    dx, dy = x - mx[..., None], y - my[..., None]
    sx, sy = np.sqrt((dx * dx).mean(axis=2)), np.sqrt((dy * dy).mean(axis=2))
    textured = (sx >= FLAT_STD) & (sy >= FLAT_STD)
    correlated = (dx * dy).mean(axis=2) >= CELL_NCC * sx * sy
    flat = (sx < FLAT_STD) & (sy < FLAT_STD)
    out: npt.NDArray[np.bool_] = (textured & correlated) | (flat & (np.abs(mx - my) <= FLAT_MEAN))
    return out


def three_way(
    query_pixels: npt.NDArray[np.uint8],
    query_size: tuple[int, int],
    a_pixels: npt.NDArray[np.uint8],
    a_size: tuple[int, int],
    b_pixels: npt.NDArray[np.uint8],
    b_size: tuple[int, int],
    query_to_a: npt.NDArray[np.float64],
    b_to_a: npt.NDArray[np.float64],
) -> ThreeWay | None:
    """The test image and corpus image B aligned onto corpus image A (2 x 3 transforms between
    working px; ``*_size``: working sizes), on one grid over the test image's overlap with A:
    the cells (covered by all three) where A and B differ, and those of them where the test
    image agrees with A or with B (``_agree``: texture by correlation, flat cells by mean).
    None when the test image leaves no overlap."""
    box = _overlap(query_to_a, query_size, a_size)
    if box is None:
        return None
    x0, y0, x1, y1 = box
    k = GRID_SIDE / max(x1 - x0, y1 - y0)
    gw, gh = max(CELL, round((x1 - x0) * k)), max(CELL, round((y1 - y0) * k))
    grid_to_a = np.array([[1 / k, 0, x0], [0, 1 / k, y0]], np.float64)
    a, _ = _sample(a_pixels, grid_to_a, a_size[0], (gw, gh))
    grid = np.vstack([grid_to_a, [0.0, 0.0, 1.0]])
    sampled = []
    for pixels, size, to_a in ((query_pixels, query_size, query_to_a), (b_pixels, b_size, b_to_a)):
        inverse = np.linalg.inv(np.vstack([to_a, [0.0, 0.0, 1.0]]))
        sampled.append(_sample(pixels, (inverse @ grid)[:2], size[0], (gw, gh)))
    (q, q_valid), (b, b_valid) = sampled
    rows, cols = gh // CELL, gw // CELL
    covered = (_cells(q_valid, rows, cols) >= 0.99).all(axis=2) & (
        _cells(b_valid, rows, cols) >= 0.99
    ).all(axis=2)
    ca, cb, cq = _cells(a, rows, cols), _cells(b, rows, cols), _cells(q, rows, cols)
    differing = covered & ~_agree(ca, cb)
    with_a, with_b = differing & _agree(cq, ca), differing & _agree(cq, cb)
    return ThreeWay(
        differing=int(differing.sum()),
        with_a=int(with_a.sum()),
        with_b=int(with_b.sum()),
        with_either=int((with_a | with_b).sum()),
    )


def whole_agreement(
    query: npt.NDArray[np.uint8], reference: npt.NDArray[np.uint8], *, mirrored: bool = False
) -> ContentAgreement | None:
    """Agreement of two grayscale images compared whole (``mirrored``: the query flipped
    left-right first), in the frames the pixel verifier searches: the query stretched onto
    the reference and zoomed about its centre by each of ``WHOLE_SCALES`` (1.2-1.45: a copy
    inside a border or padding), the best of them. A copy agrees almost everywhere in one of
    them; two photos under one frame or window chrome agree only on it in all."""
    q = content_pixels(query[:, ::-1] if mirrored else query)
    r = content_pixels(reference)
    (qh, qw), (rh, rw) = q.shape, r.shape
    best: ContentAgreement | None = None
    for zoom in WHOLE_SCALES:
        sx, sy = zoom * rw / qw, zoom * rh / qh
        transform = np.array([[sx, 0.0, rw * (1 - zoom) / 2], [0.0, sy, rh * (1 - zoom) / 2]])
        found = content_agreement(q, (qw, qh), r, (rw, rh), transform)
        if found is not None and (best is None or found.score > best.score):
            best = found
    return best
