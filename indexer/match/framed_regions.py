"""Framed regions: the axis-aligned pictures a screenshot, slide or collage shows.

A photo pasted into a page keeps its rectangle: four straight edges where the page's pixels
step to the photo's. ``inset_candidates`` embeds a fixed grid of windows of every large test
image, and a window 45% of the side holding a 30% inset is mostly page: a texture (grass,
gravel) inset there embeds far from its source (cosine 0.23-0.31 on ``bench.recall``). Cut
along its own edges, the inset embeds as itself.

``framed_boxes`` finds such rectangles: long runs of strong colour steps along columns
(left and right sides) and rows (top and bottom), paired into rectangles whose four sides
the steps cover (``MIN_SIDE_COVER`` each, ``MIN_MEAN_COVER`` on average), less what they
cover on the lines just outside (a picture's side is a lone line; inside a texture every
line is covered), at least ``MIN_FRACTION`` of the shorter side on each axis and under
``MAX_AREA`` of the image (the image itself is embedded whole already). Sides on the image's
own border are not scored (a collage's corner cell, a picture at the page's edge); two inside
it are needed. Overlapping finds are reduced to the best framed (``MAX_OVERLAP``),
``MAX_FRAMES`` kept. A frame only nominates candidates, like a grid window: the geometric
step on its crop decides. Two photos touching without a gutter are not told apart (the line
between them has photo on both sides, like a texture's).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from PIL import Image

# Long side (px) the image is reduced to for the search (the boxes are fractions of it).
WORK_SIDE = 512
# A colour step counts as an edge at this many grey levels (the largest of the three channels).
STEP = 24
# Each side of a frame is at least this share of the image's shorter side: a 30% inset's
# shorter side is at least ~0.2 of the page's (aspect kept, fitted in 30% of each axis).
MIN_FRACTION = 0.15
# Frames covering this share of the image or more are the image itself.
MAX_AREA = 0.8
# Share of each side's length the edge steps cover, and on average over the four sides.
MIN_SIDE_COVER = 0.5
MIN_MEAN_COVER = 0.75
# A side on the image's own border (a picture at the page's edge, a collage's corner cell) is
# not scored; a frame needs two sides inside the image, and ranks as if each border side were
# covered this much (a picture inside the page first).
BORDER_SIDE = 0.5
# Two frames sharing this much of the smaller one's area are one (the better framed kept): a
# frame around two collage cells, or around a picture and its caption, gives way to the cell
# or the picture.
MAX_OVERLAP = 0.6
# Frames kept per image (a 3 x 3 collage's cells); each is one more embedding.
MAX_FRAMES = 9
# Lines (the longest runs) per axis paired into frames: bounds the cost on textures.
MAX_LINES = 48
# Gaps (px at WORK_SIDE) bridged along a side's edge steps when it is scored, and along the
# runs that make candidate lines.
_GAP = 2
# Frames (best framed first) the overlap reduction looks through: bounds its cost.
_SURVIVORS = 2048
# Parallel lines this many px outside a side: on average they must not be covered like it.
_OUTSIDE = (2, 3, 4, 5)
# A line counts only within this many px of where a run across it starts or ends (a corner).
_CORNER = 3


def framed_boxes(image: Image.Image) -> list[tuple[float, float, float, float]]:
    """Up to ``MAX_FRAMES`` rectangles (x0, y0, x1, y1 as fractions of ``image``'s width and
    height, best framed first) whose four sides are straight edges in ``image``."""
    pixels = _reduced(image)
    h, w = pixels.shape[:2]
    if min(h, w) < 16:
        return []
    # colour steps: column boundary x lies between pixels x and x + 1, row boundary y likewise
    cols = _bridged(_steps(pixels, axis=1) >= STEP, axis=0, gap=_GAP)  # (h, w - 1)
    rows = _bridged(_steps(pixels, axis=0) >= STEP, axis=1, gap=_GAP)  # (h - 1, w)
    min_len = max(8, round(MIN_FRACTION * min(h, w)))
    upright = _runs(cols.T, min_len)  # (column boundary, first row, last row + 1)
    across = _runs(rows, min_len)  # (row boundary, first column, last column + 1)
    # a frame's corner is where a run of one direction ends and one of the other begins
    xs = _lines(upright, np.r_[across[1] - 1, across[2] - 1], w - 1)
    ys = _lines(across, np.r_[upright[1] - 1, upright[2] - 1], h - 1)
    col_sum = _cumulative(cols, axis=0)  # (h + 1, w - 1)
    row_sum = _cumulative(rows, axis=1)  # (h - 1, w + 1)
    # every (x0, x1) pair against every (y0, y1) pair at once (indices into xs and ys)
    ia, ib = (v.ravel() for v in np.meshgrid(np.arange(len(xs)), np.arange(len(xs)), indexing="ij"))
    wide = xs[ib] - xs[ia] >= min_len
    ia, ib = ia[wide], ib[wide]
    jc, jd = (v.ravel() for v in np.meshgrid(np.arange(len(ys)), np.arange(len(ys)), indexing="ij"))
    tall = ys[jd] - ys[jc] >= min_len
    jc, jd = jc[tall], jd[tall]
    if not len(ia) or not len(jc):
        return []
    x0s, x1s, y0s, y1s = xs[ia], xs[ib], ys[jc], ys[jd]
    sized = (x1s - x0s)[None, :] * (y1s - y0s)[:, None] < MAX_AREA * w * h
    # first the share of each side the steps cover (an upper bound of what follows), from
    # two small tables: every line across every span of the other direction ...
    upright_cover = _side(col_sum, xs[None, :], y0s[:, None] + 1, y1s[:, None] + 1, w - 1)
    across_cover = _side(row_sum.T, ys[None, :], x0s[:, None] + 1, x1s[:, None] + 1, h - 1)
    # ... and what each line covers as a left / right (top / bottom) side less what the lines
    # just outside it cover (``_OUTSIDE``): a picture's side is a lone line, a texture's runs
    # are not. Every value depends on one line and one span, so it is a table too
    span_y, span_x = (y0s[:, None] + 1, y1s[:, None] + 1), (x0s[:, None] + 1, x1s[:, None] + 1)
    left = _contrast(col_sum, xs[None, :], -1, *span_y, w - 1, upright_cover)
    right = _contrast(col_sum, xs[None, :], 1, *span_y, w - 1, upright_cover)
    top = _contrast(row_sum.T, ys[None, :], -1, *span_x, h - 1, across_cover)
    bottom = _contrast(row_sum.T, ys[None, :], 1, *span_x, h - 1, across_cover)
    # a frame keeps no side inside the image under MIN_SIDE_COVER, its cover or its contrast
    # (``_framed``; the contrast is at most the cover): a product of the tables' tests, run on
    # booleans over every pair of line pairs; the rest of ``_framed`` (two sides inside, the
    # mean) on the frames it leaves. On a textured wallpaper the covers alone left 419k
    # frames to score line by line.
    yi, xi = np.nonzero(
        sized
        & ~(left < MIN_SIDE_COVER)[:, ia]  # NaN (a side on the border) passes
        & ~(right < MIN_SIDE_COVER)[:, ib]
        & ~(top < MIN_SIDE_COVER)[:, jc].T
        & ~(bottom < MIN_SIDE_COVER)[:, jd].T
    )
    a, b, c, d = ia[xi], ib[xi], jc[yi], jd[yi]
    covered = [upright_cover[yi, a], upright_cover[yi, b], across_cover[xi, c], across_cover[xi, d]]
    sides = [left[yi, a], right[yi, b], top[xi, c], bottom[xi, d]]
    keep = _framed(covered) & _framed(sides)
    sides = [side[keep] for side in sides]
    a, b, c, d = xs[a[keep]], xs[b[keep]], ys[c[keep]], ys[d[keep]]
    # ranked with a border side worth ``BORDER_SIDE``: a picture inside the page first
    stacked = np.stack(sides)
    mean = np.where(np.isnan(stacked), BORDER_SIDE, stacked).mean(axis=0)
    found = sorted(
        zip(
            (-mean).tolist(),
            (a + 1).tolist(),
            (c + 1).tolist(),
            (b + 1).tolist(),
            (d + 1).tolist(),
            strict=True,
        )
    )
    kept: list[tuple[int, int, int, int]] = []
    for _, x0, y0, x1, y1 in found[:_SURVIVORS]:
        box = (x0, y0, x1, y1)
        if all(shared_area(box, other) < MAX_OVERLAP for other in kept):
            kept.append(box)
            if len(kept) == MAX_FRAMES:
                break
    return [(x0 / w, y0 / h, x1 / w, y1 / h) for x0, y0, x1, y1 in kept]


def _reduced(image: Image.Image) -> npt.NDArray[np.int16]:
    rgb = image.convert("RGB")
    scale = WORK_SIDE / max(rgb.size)
    if scale < 1.0:
        size = (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale)))
        rgb = rgb.resize(size, Image.Resampling.BOX)
    return np.asarray(rgb, np.int16)


def _steps(pixels: npt.NDArray[np.int16], axis: int) -> npt.NDArray[np.int16]:
    """The colour step at each boundary between neighbouring pixels along ``axis`` (the
    largest of the channels'): over one pixel, or over two where the reduction blended the
    boundary's pixel (an edge at a fractional position splits its step in two)."""
    n = pixels.shape[axis]

    def span(lo: int, hi: int) -> npt.NDArray[np.int16]:
        idx: list[slice | int] = [slice(None), slice(None), 0]
        out: npt.NDArray[np.int16] | None = None
        for channel in range(pixels.shape[2]):
            idx[2] = channel
            idx[axis] = slice(hi, n)
            later = pixels[tuple(idx)]
            idx[axis] = slice(0, n - hi)
            step = np.abs(later - pixels[tuple(idx)])
            out = step if out is None else np.maximum(out, step)
        assert out is not None
        return out

    one, two = span(0, 1), span(0, 2)
    # boundary i (pixels i, i + 1) also takes the step from pixel i - 1 to i + 1
    idx = [slice(None), slice(None)]
    idx[axis] = slice(1, None)
    one[tuple(idx)] = np.maximum(one[tuple(idx)], two)
    return one


def _bridged(edges: npt.NDArray[np.bool_], axis: int, gap: int) -> npt.NDArray[np.bool_]:
    """``edges`` with gaps of up to ``gap`` px along ``axis`` filled (a run crossing a pixel
    where the photo's edge colour happens to match the page's stays one run): a pixel is
    filled where an edge lies ``p`` before it and another ``q`` after it, ``p + q <= gap + 1``
    (shifted ands: ~4x less CPU than the nearest edge on each side by running max / min)."""
    moved = np.moveaxis(edges, axis, -1)
    n = moved.shape[-1]
    out = moved.copy()
    for before in range(1, gap + 1):
        for after in range(1, gap + 2 - before):
            if before + after < n:
                out[..., before : n - after] |= (
                    moved[..., : n - after - before] & moved[..., before + after :]
                )
    return np.moveaxis(out, -1, axis)


def _runs(
    edges: npt.NDArray[np.bool_], min_len: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Runs of at least ``min_len`` True values along each row of ``edges``: (row, first,
    last + 1) arrays."""
    padded = np.zeros((edges.shape[0], edges.shape[1] + 2), np.int8)
    padded[:, 1:-1] = edges
    change = np.diff(padded, axis=1)
    # flat positions, then divmod (one pass, not a 2-D nonzero per sign): starts and ends
    # alternate along each row
    at = np.flatnonzero(change)
    line, pos = np.divmod(at, change.shape[1])
    starts = change.ravel()[at] == 1
    line, first, end = line[starts], pos[starts], pos[~starts]
    long = end - first >= min_len
    return line[long], first[long], end[long]


def _lines(
    runs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]],
    corners: npt.NDArray[np.int64],
    border: int,
) -> npt.NDArray[np.int64]:
    """The lines (boundary positions) of ``runs`` within ``_CORNER`` px of a run across
    (``corners``: where those start or end), the ``MAX_LINES`` longest, and the image's two
    borders (-1 and ``border``)."""
    line, first, end = runs
    if len(line) and len(corners):
        corners = np.sort(corners)
        at = (
            np.clip(np.searchsorted(corners, line), 1, len(corners) - 1)
            if len(corners) > 1
            else np.zeros_like(line)
        )
        nearest = np.minimum(
            np.abs(corners[at] - line), np.abs(corners[np.maximum(at - 1, 0)] - line)
        )
        near = nearest <= _CORNER
        line, length = line[near], (end - first)[near]
        longest = np.zeros(border + 1, np.int64)
        np.maximum.at(longest, line, length)
        kept = np.flatnonzero(longest)
        kept = kept[np.argsort(-longest[kept], kind="stable")[:MAX_LINES]]
    else:
        kept = np.zeros(0, np.int64)
    return np.unique(np.r_[-1, kept, border])


def _cumulative(edges: npt.NDArray[np.bool_], axis: int) -> npt.NDArray[np.int32]:
    shape = list(edges.shape)
    shape[axis] += 1
    out = np.zeros(shape, np.int32)
    idx = [slice(None)] * edges.ndim
    idx[axis] = slice(1, None)
    out[tuple(idx)] = np.cumsum(edges, axis=axis, dtype=np.int32)
    return out


def _side(
    cum: npt.NDArray[np.int32],
    at: npt.NDArray[np.int64],
    lo: int | npt.NDArray[np.int64],
    hi: int | npt.NDArray[np.int64],
    border: int,
) -> npt.NDArray[np.float64]:
    """Share of the side at boundary ``at`` (one per candidate), from ``lo`` to ``hi``
    (exclusive) along the cumulative axis 0 of ``cum``, that the edge steps cover; NaN on the
    image's own border (``at`` -1 or ``border``)."""
    on_border = (at < 0) | (at >= border)
    col = np.clip(at, 0, border - 1)
    covered = cum[hi, col] - cum[lo, col]
    length = np.maximum(np.asarray(hi) - np.asarray(lo), 1)
    return np.where(on_border, np.nan, covered / length)


def _framed(sides: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.bool_]:
    """Which candidates are frames: at least two sides inside the image (NaN: on its border),
    each covered ``MIN_SIDE_COVER``, ``MIN_MEAN_COVER`` on average."""
    inside = sum((~np.isnan(side)).astype(np.int8) for side in sides)
    least = np.fmin(np.fmin(sides[0], sides[1]), np.fmin(sides[2], sides[3]))
    total = sum(np.nan_to_num(side, nan=0.0) for side in sides)
    with np.errstate(invalid="ignore"):
        return (inside >= 2) & (least >= MIN_SIDE_COVER) & (total >= MIN_MEAN_COVER * inside)  # type: ignore[no-any-return]


def _contrast(
    cum: npt.NDArray[np.int32],
    at: npt.NDArray[np.int64],
    outward: int,
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    border: int,
    side: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """``side`` (``_side`` at boundary ``at`` from ``lo`` to ``hi``, broadcast as they are) less
    the mean of what the parallel lines ``_OUTSIDE`` px further out (``outward`` -1: towards
    0) cover of the same span (0 beyond the border)."""
    beyond = np.zeros_like(side)
    for step in _OUTSIDE:
        there = at + outward * step
        inside = (there >= 0) & (there < border) & (at >= 0) & (at < border)
        beyond = beyond + np.where(inside, _side(cum, there, lo, hi, border), 0.0)
    return side - beyond / len(_OUTSIDE)


def shared_area(
    a: tuple[float, float, float, float], b: tuple[float, float, float, float]
) -> float:
    """The share of the smaller of two boxes' area that lies in both (pixels or fractions)."""
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return ix * iy / smaller if smaller else 1.0
