"""Dense alignment of small pairs the pixel verifier leaves open: re-scraped thumbnails.

A 32-64 px copy re-cut by a scraper is shifted by up to 12% of its side and zoomed by
0.75-1.33, often recoloured and re-encoded as well. The verifier
(``splitaudit.indexer.match.verify``) searches whole-pixel shifts and a fixed ladder of scales
of a 24x24 window; half a pixel off at 32 px costs fine detail most of its correlation, so a
real copy can land just under the cut-off. This module settles those pairs by aligning the
two thumbnails densely, at the verifier's 32 px resolution (the corpus side is its stored
32x32 verification thumbnail; nothing is decoded again):

1. **coarse**: the reference's band-passed central 20x20 window is matched (normalised
   cross-correlation) against the query band-passed at nine scales 0.72-1.4, every shift up
   to ``PAD`` px past the centre; all of a query's candidates at once, in one matrix product
   (``splitaudit.indexer.match.low_res_coarse``);
2. **refine**: from the best coarse (scale, shift), OpenCV's ECC (``cv2.findTransformECC``)
   fits an affine warp of the query onto the reference; a fit that is not close to a
   similarity (anisotropic scale, shear, a turn over 8 degrees, a mirror) is discarded and
   the coarse warp kept: a copy is shifted and zoomed, not sheared. ECC fits the raw
   thumbnails, not the band scored next, so the coarse warp is scored too and the better
   of the two kept; a pair still under ``SEARCH_BELOW`` gets a Nelder-Mead search of a
   similarity warp (zoom, shift) from the coarse one that maximises the band-passed r itself
   (all of a test image's searches side by side: ``aligned_scores_together``);
3. **score**: Pearson r of the two band-passed images on the overlap (the warped query's
   valid pixels, an edge ring left out), in the verifier's band and in two coarser ones
   (``SCORE_SIGMAS``; the best score is kept), normalised like the verifier's score by an
   *ambiguity* ``a``: ``(r - a) / (1 - a)``. ``a`` is the best correlation of either
   image with itself moved by 2 px (a lone edge or a gradient aligns with anything) *or* by
   3-10 px (a periodic texture: a brick wall's neighbouring tile is its shifted copy), so
   only an alignment clearly better than the image's own near-repeats counts.

The engine uses the score twice: an upright small pair the verifier left open is near when it
aligns at ``ALIGNED_NEAR``; a small pair near by a marginal verifier score alone
(``needs_confirmation``) stays near only if it aligns at ``CONFIRM_FLOOR`` (the verifier does
not weigh a texture's own repeats: a tile of a grid of coins scores near its neighbour there).

Gain and offset drop out of every correlation (photometric normalisation), and the DoG band
removes the smooth layout every photo shares. Measured on ``python -m bench.recall``: the
figures are in ``docs/recall.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.match.low_res_coarse import CoarseWindows, coarse_matches, coarse_windows
from splitaudit.indexer.match.nelder_mead import nelder_mead_many
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.match.verify import THUMB_SIZE, ImageOrThumbnail, working_gray

# Pairs whose smaller image is at most this many px are aligned (larger ones have the
# geometric step, ``splitaudit.indexer.match.geometric_tier``).
MAX_SIDE = 96
# A pair counts as aligned (near) at this score or above. Chosen on bench.recall's own
# thumbnails (seeds 0 and 1, every (sibling or unrelated thumbnail, corpus thumbnail) pair):
# same-scene siblings reach 0.68 (a tile of a grid of coins next to another), unrelated
# thumbnails 0.60; recoloured, zoomed 32-px copies the verifier misses 0.75-0.99.
ALIGNED_NEAR = 0.75
# A pair a small test image's alignment leaves at this score or more (and under ALIGNED_NEAR)
# is aligned the other way round too, the corpus thumbnail onto the test image
# (``small_pairs``). bench.recall with 12,000 distractor thumbnails, seeds 0 and 1, every pair
# of a small test image aligned both ways (34,285 and 35,336): the copies found only the
# other way round aligned at 0.40 and 0.75 the first way; ~90% of pairs get no coarse match
# that way (-1), and at 0.3 1,757 and 1,939 pairs are aligned again; no other pair reached
# ALIGNED_NEAR either way (one of a large test image did: ``small_pairs.align_small_pairs``).
ALIGNED_BACK_FROM = 0.3
# A small pair near by a verifier score under CONFIRM_BELOW alone (not its pHash) stays near
# only if it aligns at CONFIRM_FLOOR or better: the verifier does not weigh a texture's own
# repeats. bench.recall (seeds 0 and 1, every such pair): the false ones align at 0.50 (a tile
# of a grid of coins next to another, verifier 0.74) or not at all (a deep-field tile, 0.73;
# a copy matched to the wrong corpus tile, 0.72); the copies at 0.665 (a recoloured, zoomed
# camera tile) or more.
CONFIRM_BELOW = 0.80
CONFIRM_FLOOR = 0.60
# Coarse correlation below which a pair is not refined: every bench.recall copy that aligns
# at ALIGNED_NEAR has a coarse match of 0.81 or more, and 99.3% of unrelated pairs fall
# below 0.65, so they cost the coarse search alone.
COARSE_FLOOR = 0.65
# The overlap must cover this share of the reference (a copy zoomed 1.33 covers ~56%).
MIN_OVERLAP = 0.3
SCALES = tuple(float(s) for s in np.exp(np.linspace(np.log(0.72), np.log(1.4), 9)))
# How far (share of the side, in query pixels) the reference's centre may land from the
# query's: a re-cut shifts a copy by up to 12% of its side, a zoom of 1.33 stretches that.
MAX_OFFSET = 0.16
WINDOW = 20  # px of the 32-px reference matched in the coarse step
PAD = 5  # px: the query is mirrored past its edge by this much (shift + zoom reach further)
EDGE = 2  # px of the reference's border left out of the score (interpolation, padding)
MAX_TURN_DEGREES = 8.0
MAX_ANISOTROPY = 1.15  # ratio of the warp's two singular values
MAX_ZOOM = 1.6  # the warp may scale by 1 / MAX_ZOOM .. MAX_ZOOM
PERIODIC_SHIFTS = (3, 10)  # Chebyshev radii searched for a texture's own repeats (12x12 patch)
# The verifier's difference-of-Gaussians band (sigmas in 32-px thumbnail pixels): the same
# band as ``splitaudit.indexer.match.verify``, whose scores these are compared with.
_SIGMA_FINE = 0.6
_SIGMA_COARSE = 3.0
# The aligned pair is scored in the verifier's band and in one a little coarser, and keeps the
# better score: resampling, JPEG blocks and a zoom's interpolation blur a copy's finest detail
# (a recoloured, zoomed 32-px sand tile scores 0.70 in the verifier's band, 0.82 in this one).
# bench.recall, seeds 0 and 1: copies aligned at ALIGNED_NEAR 383 -> 400 of 445 and 387 -> 406
# of 455; the best (sibling or unrelated, corpus thumbnail) pair 0.54 -> 0.59 (a brick wall).
# A third, coarser band (1.0) for copies zoomed out and re-encoded at 32 px, whose detail the
# upsampling blurs further: an eagle tile 0.75 -> 0.80 (bench.recall seed 1; 0.68 before the
# Nelder-Mead search).
SCORE_SIGMAS = (_SIGMA_FINE, 0.8, 1.0)
# The direct search of a pair ECC left unaligned: a Nelder-Mead search of (zoom, x px, y px)
# whose first simplex has these steps, stopped after about SEARCH_EVALS warps. It replaced a
# compass search (steps halved down to an eighth) that stopped short on flat-bottomed surfaces:
# bench.recall seed 0, a shifted 32-px kite tile 0.51 -> 0.96, a recoloured, zoomed 64-px
# person tile 0.79 -> 0.96 (scores in the two finer bands).
SEARCH_STEPS = (0.04, 0.5, 0.5)
SEARCH_EVALS = 60
# Pairs scoring under this after ECC are searched. Every score from 0.80 up is above each of
# the alignment's cut-offs, so searching them changes no verdict, only how close a copy's score
# gets to its best warp: where ECC stops short. OpenCV 4.11's ECC stopped ~0.3 px off a
# half-pixel shift that OpenCV 5.1's fits (r 0.893 against 0.991, the search then 0.998), so
# the scores, and the tests that pin them, hold on every OpenCV the core allows.
SEARCH_BELOW = 0.95
# How a warp resamples the query (OpenCV's flag): bicubic. Bilinear interpolation half a
# pixel off damps a 32-px copy's finest detail, which the reference keeps (a sharp astronaut
# tile half a pixel off scores 0.97 bilinear, 0.99 bicubic). bench.recall seed 0: copies aligned
# at ALIGNED_NEAR 433 -> 435 of 445 (a shifted 48-px brick tile 0.58 -> 0.70, a recoloured,
# zoomed 32-px coffee tile 0.74 -> 0.84), the best (sibling or unrelated, corpus thumbnail)
# pair 0.66 -> 0.68. Lanczos gained more copies (440) but took two coins siblings to
# 0.76-0.77 (its ringing sharpens the grid's repeats too).
WARP_INTERPOLATION = 2  # cv2.INTER_CUBIC (cv2 is imported lazily)
# The Nelder-Mead search resamples bilinearly all the same: on bicubic resampling's bumpier
# surface it stopped short on two of bench.accuracy's 80% crops (r 0.87 against 0.91-0.98);
# the warp it ends on is then scored with WARP_INTERPOLATION.
SEARCH_INTERPOLATION = 1  # cv2.INTER_LINEAR
_CENTRE = (THUMB_SIZE - 1) / 2
_ECC_ITERATIONS = 30
_ECC_EPS = 1e-3
_EPS = 1e-6


@dataclass(frozen=True)
class QueryPyramid:
    """A test image prepared once for all its candidates: gray thumbnail and scaled bands."""

    thumb: npt.NDArray[np.float32]  # (32, 32) gray
    bands: tuple[tuple[float, npt.NDArray[np.float32]], ...]  # (scale, padded band-pass)
    windows: CoarseWindows  # the bands' windows the coarse step may match (``low_res_coarse``)


def prepare_query(image: ImageOrThumbnail) -> QueryPyramid:
    """The query's 32-px gray thumbnail and its band-passed versions at every ``SCALES``."""
    import cv2

    gray = (
        Image.fromarray(np.asarray(image, dtype=np.uint8)).convert("L")
        if isinstance(image, np.ndarray)
        else working_gray(image)
    )
    bands = []
    for scale in SCALES:
        n = round(THUMB_SIZE * scale)
        pixels = np.asarray(gray.resize((n, n), Image.Resampling.BILINEAR), np.float32)
        band = _band_pass(pixels[None])[0]
        bands.append((scale, cv2.copyMakeBorder(band, PAD, PAD, PAD, PAD, cv2.BORDER_REFLECT)))
    thumb = np.asarray(gray.resize((THUMB_SIZE, THUMB_SIZE), Image.Resampling.BILINEAR), np.float32)
    windows = coarse_windows(bands, window=WINDOW, pad=PAD, side=THUMB_SIZE, max_offset=MAX_OFFSET)
    return QueryPyramid(thumb, tuple(bands), windows)


def aligned_score(
    query: QueryPyramid, reference: npt.NDArray[np.uint8], exact_from: float | None = None
) -> float:
    """Score in [-1, 1] of the query densely aligned onto a 32x32 uint8 reference thumbnail
    (``verify_thumbnail``); -1 where no plausible alignment exists. Below ``exact_from``
    (default ``ALIGNED_NEAR``) the value is an upper bound (the ambiguity is not computed where
    it cannot matter)."""
    return float(aligned_scores(query, np.asarray(reference)[None], exact_from)[0])


def _refined_score(
    query: QueryPyramid,
    ref: npt.NDArray[np.float32],
    ref_band: npt.NDArray[np.float32],
    match: tuple[float, int, int],
    cut: float,
) -> tuple[float, npt.NDArray[np.float64] | None]:
    """A pair's score from its coarse match (scale, px, py: the window's position in the
    unpadded band) after ECC's refinement, in the scored bands, and the similarity warp
    (zoom, x px, y px) the Nelder-Mead search starts from where the pair needs one (under
    ``SEARCH_BELOW``), else None."""
    scale, px, py = match
    lo = (THUMB_SIZE - WINDOW) // 2
    # The warp maps reference pixels to query pixels (ECC's convention, WARP_INVERSE_MAP).
    warp = np.array(
        [[1 / scale, 0, (px - lo) / scale], [0, 1 / scale, (py - lo) / scale]], np.float32
    )
    refined = _refined(ref, query.thumb, warp)
    # ECC fits the raw thumbnails; the score is the band-passed correlation, which a fit
    # pulled by a strong edge or a flat area can lower (a retina's rim: r 0.88 -> 0.72):
    # the better of the two warps is kept.
    fits = [_overlap(query.thumb, w, ref_band) for w in _distinct(warp, refined)]
    kept = [fit for fit in fits if fit is not None]
    if not kept:
        return -1.0, None
    score = _scored(ref, ref_band, max(kept, key=lambda fit: fit[0]), cut)
    # ECC's fit wandered off (an anisotropic warp pulled by a rim or a horizon) or stopped
    # short: the search looks for the similarity warp that maximises the scored r itself.
    start = np.array([1 / scale, (px - lo) / scale, (py - lo) / scale])
    return score, (start if score < SEARCH_BELOW else None)


Fit = tuple[float, npt.NDArray[np.float32], npt.NDArray[np.bool_]]


def _scored(
    ref: npt.NDArray[np.float32], ref_band: npt.NDArray[np.float32], fit: Fit, cut: float
) -> float:
    """The normalised score of one fit (r, warped query, overlap), the better of the
    ``SCORE_SIGMAS`` bands; below ``cut`` an upper bound (r itself)."""
    fine_r, warped, mask = fit
    best = -1.0
    for sigma in SCORE_SIGMAS:
        if sigma == _SIGMA_FINE:  # r is the fit's own; the warped band only if it is needed
            r = fine_r
            if r >= cut:
                bands = (ref_band, _band_pass(warped[None])[0])
        else:
            bands = (_band_pass(ref[None], sigma)[0], _band_pass(warped[None], sigma)[0])
            r = _pearson(bands[1], bands[0], mask)
        if r < cut:  # the score is at most r: under the cut, whatever the ambiguity
            best = max(best, r)
            continue
        ambiguity = max(_ambiguity(bands[0], mask), _ambiguity(bands[1], mask))
        best = max(best, (r - ambiguity) / max(1.0 - ambiguity, _EPS))
    return best


def _searched(
    thumbs: npt.NDArray[np.float32],
    ref_bands: npt.NDArray[np.float32],
    starts: npt.NDArray[np.float64],
) -> list[Fit | None]:
    """Nelder-Mead search, for each (query thumbnail, reference band, start), of a similarity
    warp (zoom, shift; no turn) from the coarse one that maximises the band-passed r on the
    overlap; the best fit of each, None if none fits. The searches run side by side
    (``nelder_mead_many``: each step warps one point of every pair in one vectorised call,
    ``_linear_overlaps``), resampling bilinearly (``SEARCH_INTERPOLATION``); the fit each ends
    on is resampled again with ``WARP_INTERPOLATION`` to be scored."""

    def costs(
        points: npt.NDArray[np.float64], rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.float64]:
        out = np.full(len(points), 2.0)  # no fit: worse than any correlation
        allowed = _allowed(points)
        if allowed.any():
            kept = rows[allowed]
            r = _linear_overlaps(thumbs[kept], points[allowed], ref_bands[kept])
            out[allowed] = np.where(np.isnan(r), 2.0, -r)
        return out

    best, cost = nelder_mead_many(costs, starts, np.array(SEARCH_STEPS), SEARCH_EVALS)
    return [
        None if c >= 2.0 else _overlap(thumb, _similarity(point), band)
        for thumb, point, c, band in zip(thumbs, best, cost.tolist(), ref_bands, strict=True)
    ]


def _allowed(params: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Whether each similarity warp of an (n, 3) array (zoom, x px, y px) stays within the
    zoom and the centre's move a copy may have."""
    zoom = params[:, 0]
    landed = params[:, 1:] + _CENTRE * (zoom[:, None] - 1)  # the centre's move
    return (
        (zoom > 1 / MAX_ZOOM)
        & (zoom < MAX_ZOOM)
        & (np.abs(landed).max(axis=1) <= MAX_OFFSET * THUMB_SIZE + 1.0)
    )


def _similarity(params: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    zoom, tx, ty = params
    return np.array([[zoom, 0.0, tx], [0.0, zoom, ty]], np.float32)


def needs_confirmation(
    verify: float | None,
    hamming: int | None,
    min_side: int | None,
    orientation: str,
    near: bool,
    th: Thresholds,
) -> bool:
    """Whether a small pair is near (``near``: ``Thresholds.is_near``, which the caller asks
    of all its pairs at once, ``near_many``) by a verifier score under ``CONFIRM_BELOW`` alone
    (not by its pHash; upright or mirrored, as the verifier searches): the alignment must
    confirm it."""
    if not near or verify is None or min_side is None or min_side > MAX_SIDE:
        return False
    if verify >= CONFIRM_BELOW or orientation not in ("identity", "mirror"):
        return False
    return not (hamming is not None and hamming <= th.phash_hamming)


def aligned_scores(
    query: ImageOrThumbnail | QueryPyramid,
    references: npt.NDArray[np.uint8],
    exact_from: float | None = None,
) -> npt.NDArray[np.float32]:
    """``aligned_score`` of one query against each of an (n, 32, 32) stack of thumbnails."""
    return aligned_scores_together([(query, references, exact_from)])[0]


AlignJob = tuple[ImageOrThumbnail | QueryPyramid, npt.NDArray[np.uint8], float | None]


def aligned_scores_together(jobs: Sequence[AlignJob]) -> list[npt.NDArray[np.float32]]:
    """``aligned_scores`` of several (query, references, exact_from) at once: each job's
    scores are what ``aligned_scores`` gives it alone, but the Nelder-Mead searches of every
    job's pairs run side by side (``_searched``), the more of them the cheaper each (a test
    image's upright and mirrored queries, its pairs to align and to confirm)."""
    outs: list[npt.NDArray[np.float32]] = []
    # every pair still to search: (job, reference row, query thumbnail, start)
    pending: list[tuple[int, int, npt.NDArray[np.float32], npt.NDArray[np.float64]]] = []
    prepared_refs = []
    for j, (query, references, exact_from) in enumerate(jobs):
        prepared = query if isinstance(query, QueryPyramid) else prepare_query(query)
        cut = ALIGNED_NEAR if exact_from is None else exact_from
        refs = np.asarray(references, np.float32).reshape(-1, THUMB_SIZE, THUMB_SIZE)
        out = np.full(len(refs), -1.0, np.float32)
        outs.append(out)
        ref_bands = _band_pass(refs)
        prepared_refs.append((refs, ref_bands, cut))
        if not len(refs):
            continue
        lo = (THUMB_SIZE - WINDOW) // 2
        templates = ref_bands[:, lo : lo + WINDOW, lo : lo + WINDOW]
        # Only windows whose centre lies within MAX_OFFSET of the query's centre (two pictures
        # of one kind, a house or a logo, align anywhere further off); a flat template matches
        # nothing (its score is -2).
        found = coarse_matches(prepared.windows, templates)
        for i in np.flatnonzero(found.score >= COARSE_FLOOR).tolist():
            match = (float(found.scale[i]), int(found.x[i]) - PAD, int(found.y[i]) - PAD)
            out[i], start = _refined_score(prepared, refs[i], ref_bands[i], match, cut)
            if start is not None:
                pending.append((j, i, prepared.thumb, start))
    if pending:
        fits = _searched(
            np.stack([thumb for _, _, thumb, _ in pending]),
            np.stack([prepared_refs[j][1][i] for j, i, _, _ in pending]),
            np.stack([start for _, _, _, start in pending]),
        )
        for (j, i, _, _), fit in zip(pending, fits, strict=True):
            if fit is not None:
                refs, ref_bands, cut = prepared_refs[j]
                outs[j][i] = max(outs[j][i], _scored(refs[i], ref_bands[i], fit, cut))
    return [np.clip(out, -1.0, 1.0) for out in outs]


def _distinct(
    coarse: npt.NDArray[np.float32], refined: npt.NDArray[np.float32]
) -> list[npt.NDArray[np.float32]]:
    return [coarse] if np.array_equal(coarse, refined) else [coarse, refined]


def _overlap(
    thumb: npt.NDArray[np.float32],
    warp: npt.NDArray[np.float32],
    ref_band: npt.NDArray[np.float32],
    interpolation: int | None = None,
) -> tuple[float, npt.NDArray[np.float32], npt.NDArray[np.bool_]] | None:
    """Pearson r of the query warped onto the reference, on their band-passed overlap (an edge
    ring left out), with the warped query and the overlap; None where it is under MIN_OVERLAP."""
    import cv2

    resample = WARP_INTERPOLATION if interpolation is None else interpolation
    flags = resample | cv2.WARP_INVERSE_MAP
    size = (THUMB_SIZE, THUMB_SIZE)
    warped: npt.NDArray[np.float32] = np.asarray(
        cv2.warpAffine(thumb, warp, size, flags=flags, borderMode=cv2.BORDER_REPLICATE), np.float32
    )
    valid = cv2.warpAffine(_ones(), warp, size, flags=flags, borderValue=0.0) > 0.999
    mask = cv2.erode(valid.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    mask[:EDGE] = mask[-EDGE:] = False
    mask[:, :EDGE] = mask[:, -EDGE:] = False
    if np.count_nonzero(mask) < MIN_OVERLAP * mask.size:  # mask.mean(), without its wrapper
        return None
    return _pearson(_band_pass(warped[None])[0], ref_band, mask), warped, mask


def _linear_overlaps(
    thumbs: npt.NDArray[np.float32],
    params: npt.NDArray[np.float64],
    ref_bands: npt.NDArray[np.float32],
) -> npt.NDArray[np.float64]:
    """``_overlap``'s r for many (query thumbnail, similarity warp, reference band) at once,
    resampled bilinearly (``SEARCH_INTERPOLATION``): (n, 32, 32) stacks of thumbnails and
    bands, an (n, 3) array of warps (zoom, x px, y px); NaN where the overlap is under
    ``MIN_OVERLAP``. A similarity warp without a turn resamples rows and columns apart, so
    each warp is two (32, 32) interpolation matrices (``_axis_samples``), sampled at the exact
    coordinates as OpenCV 5 does (OpenCV 4 rounds them to 1/32 px: the search's path may
    differ by that, not the fit it ends on, which ``_overlap`` scores)."""
    n = len(params)
    warp = params.astype(np.float32).astype(np.float64)  # the precision ``_similarity`` gives
    matrices, inside = _axis_samples(np.tile(warp[:, 0], 2), warp[:, 1:].T.ravel())
    columns, rows = matrices[:n], matrices[n:]
    warped = rows @ thumbs @ columns.transpose(0, 2, 1)
    # The overlap is a rectangle: the rows and the columns whose samples lie inside (the
    # warped ones over 0.999, as ``_overlap``), eroded by one px, less the edge ring.
    kept = _kept(inside)
    kept_x, kept_y = kept[:n], kept[n:]
    weight = (kept_y[:, :, None] & kept_x[:, None, :]).reshape(n, -1).astype(np.float32)
    count = kept_y.sum(axis=1) * kept_x.sum(axis=1)
    # float32 products, float64 sums: the search's r, not the score (``_overlap`` scores)
    x = _band_pass(warped.astype(np.float32, copy=False)).reshape(n, -1) * weight
    y = ref_bands.reshape(n, -1) * weight
    sx, sy = x.sum(axis=1, dtype=np.float64), y.sum(axis=1, dtype=np.float64)
    per = np.maximum(count, 1)
    xy = np.einsum("ij,ij->i", x, y, dtype=np.float64) - sx * sy / per
    xx = np.einsum("ij,ij->i", x, x, dtype=np.float64) - sx * sx / per
    yy = np.einsum("ij,ij->i", y, y, dtype=np.float64) - sy * sy / per
    r = xy / (np.sqrt(np.maximum(xx * yy, 0.0)) + _EPS)
    return np.where(count < MIN_OVERLAP * THUMB_SIZE**2, np.nan, r)


def _kept(inside: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Per warp, the rows (or columns) of the overlap: sampled inside the image, their two
    neighbours too (``_overlap``'s 3x3 erosion), the ``EDGE`` ring left out."""
    valid = inside > 0.999
    kept = np.zeros_like(valid)
    kept[:, 1:-1] = valid[:, :-2] & valid[:, 1:-1] & valid[:, 2:]
    kept[:, :EDGE] = kept[:, -EDGE:] = False
    return kept


def _axis_samples(
    zoom: npt.NDArray[np.float64], offset: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]:
    """Along one axis, the (n, 32, 32) bilinear sampling matrices of ``zoom * i + offset``
    (the border replicated) and, per output pixel, the weight its sample takes from inside
    the image (1 where it lies inside)."""
    s = THUMB_SIZE
    at = zoom[:, None] * np.arange(s, dtype=np.float64)[None, :] + offset[:, None]
    low = np.floor(at)
    frac = at - low
    first = low.astype(np.intp)
    # row (n, i) of the matrices, flat: its two taps, the second added where both clamp to one
    row = np.arange(len(zoom) * s).reshape(len(zoom), s) * s
    matrix = np.zeros(len(zoom) * s * s, np.float32)
    matrix[row + np.minimum(np.maximum(first, 0), s - 1)] = 1 - frac
    matrix[row + np.minimum(np.maximum(first + 1, 0), s - 1)] += frac
    # the first tap lies inside from 0 to s - 1, the second from -1 to s - 2
    inside = (1 - frac) * ((first >= 0) & (first < s)) + frac * ((first >= -1) & (first < s - 1))
    return matrix.reshape(len(zoom), s, s), inside


def _refined(
    reference: npt.NDArray[np.float32],
    query: npt.NDArray[np.float32],
    warp: npt.NDArray[np.float32],
) -> npt.NDArray[np.float32]:
    """ECC's affine refinement of ``warp`` when it converges to a near-similarity, else ``warp``."""
    import cv2

    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, _ECC_ITERATIONS, _ECC_EPS)
    try:
        _, fitted = cv2.findTransformECC(
            reference, query, warp.copy(), cv2.MOTION_AFFINE, criteria, _full_mask(), 3
        )
    except cv2.error:  # no convergence (flat content, a degenerate fit): keep the coarse warp
        return warp
    linear = fitted[:, :2].astype(np.float64)
    singular = np.linalg.svd(linear, compute_uv=False)
    turn = abs(np.degrees(np.arctan2(linear[1, 0] - linear[0, 1], linear[0, 0] + linear[1, 1])))
    centre = (THUMB_SIZE - 1) / 2
    moved = fitted[:, :2] @ np.array([centre, centre]) + fitted[:, 2] - centre
    plausible = (
        float(np.abs(moved).max()) <= MAX_OFFSET * THUMB_SIZE + 1.0
        and np.linalg.det(linear) > 0
        and singular.max() / max(singular.min(), _EPS) < MAX_ANISOTROPY
        and turn < MAX_TURN_DEGREES
        and singular.min() > 1 / MAX_ZOOM
        and singular.max() < MAX_ZOOM
    )
    out: npt.NDArray[np.float32] = fitted.astype(np.float32) if plausible else warp
    return out


@lru_cache(maxsize=32)
def _blur_matrix(n: int, sigma: float) -> npt.NDArray[np.float32]:
    """(n, n) Gaussian smoothing matrix with edge-renormalised weights: ``M @ x @ M.T``."""
    idx = np.arange(n, dtype=np.float64)
    weights = np.exp(-0.5 * ((idx[:, None] - idx[None, :]) / sigma) ** 2)
    weights[weights < 1e-8] = 0.0  # float32 denormals would slow every product
    weights /= weights.sum(axis=1, keepdims=True)
    return weights.astype(np.float32)


def _band_pass(
    pixels: npt.NDArray[np.float32], sigma_fine: float = _SIGMA_FINE
) -> npt.NDArray[np.float32]:
    """Difference of Gaussians (fine minus coarse blur) of each image in a (n, s, s) stack."""
    s = pixels.shape[-1]
    fine, coarse = _blur_matrix(s, sigma_fine), _blur_matrix(s, _SIGMA_COARSE)
    band = fine @ pixels @ fine.T - coarse @ pixels @ coarse.T
    out: npt.NDArray[np.float32] = band.astype(np.float32, copy=False)
    return out


@lru_cache(maxsize=1)
def _ones() -> npt.NDArray[np.float32]:
    return np.ones((THUMB_SIZE, THUMB_SIZE), np.float32)


@lru_cache(maxsize=1)
def _full_mask() -> npt.NDArray[np.uint8]:
    return np.ones((THUMB_SIZE, THUMB_SIZE), np.uint8)


def _pearson(
    a: npt.NDArray[np.float32], b: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]
) -> float:
    x, y = a[mask].astype(np.float64), b[mask].astype(np.float64)
    # sum / size is ndarray.mean's own arithmetic (the same bits), without its Python wrapper:
    # this runs ~60 times per pair in the Nelder-Mead search
    x, y = x - x.sum() / x.size, y - y.sum() / y.size
    return float(x @ y / (np.sqrt((x @ x) * (y @ y)) + _EPS))


def _ambiguity(band: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]) -> float:
    """How well the image matches itself moved: by 2 px on the overlap, or by 3-10 px anywhere
    (a periodic texture's repeats); 0 at least."""
    import cv2

    best = max(0.0, _moved_correlation(band, mask))
    far = PERIODIC_SHIFTS[1]
    half = THUMB_SIZE // 2 - far  # a centre patch that fits every shift up to ``far``
    centre = np.ascontiguousarray(band[far : far + 2 * half, far : far + 2 * half])
    if float(centre.std()) > _EPS:
        self_match = cv2.matchTemplate(band, centre, cv2.TM_CCOEFF_NORMED)
        best = max(best, float(self_match[_periodic_moves()].max()))
    return best


@lru_cache(maxsize=1)
def _periodic_moves() -> npt.NDArray[np.bool_]:
    """The self-match positions ``_ambiguity`` weighs: moves of ``PERIODIC_SHIFTS`` px."""
    near, far = PERIODIC_SHIFTS
    dy, dx = np.mgrid[-far : far + 1, -far : far + 1]
    away: npt.NDArray[np.bool_] = np.maximum(np.abs(dy), np.abs(dx)) >= near
    return away


def _moved_correlation(band: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]) -> float:
    """The best Pearson r of the image with itself moved by 2 px (the 16 moves of the ring), on
    the overlap of the mask with the moved mask, where it holds more than 16 px; -1 if none
    does. All moves at once (one gather; the mask's edge ring keeps wrapped pixels out)."""
    inside = np.flatnonzero(mask)
    gather = _ring_gather(band.shape[0], 2)[:, inside]  # (16, pixels in the mask)
    flat = band.astype(np.float64).ravel()
    values, moved = flat[inside], flat[gather]
    both = mask.ravel()[gather].astype(np.float64)
    count = both.sum(axis=1)
    usable = count > 16
    if not usable.any():
        return -1.0
    moved, both, count = moved[usable], both[usable], count[usable]
    x = (values[None, :] - (both @ values / count)[:, None]) * both
    y = (moved - ((both * moved).sum(axis=1) / count)[:, None]) * both
    r = np.einsum("ij,ij->i", x, y) / (
        np.sqrt(np.einsum("ij,ij->i", x, x) * np.einsum("ij,ij->i", y, y)) + _EPS
    )
    return float(r.max())


@lru_cache(maxsize=4)
def _ring_gather(side: int, radius: int) -> npt.NDArray[np.intp]:
    """Flat indices: row ``k`` gathers an image rolled by the ring's ``k``-th move (np.roll)."""
    index = np.arange(side * side).reshape(side, side)
    return np.stack([np.roll(index, (dy, dx), (0, 1)).ravel() for dx, dy in _ring(radius)]).astype(
        np.intp
    )


def _ring(radius: int) -> list[tuple[int, int]]:
    return [
        (dx, dy)
        for dy in range(-radius, radius + 1)
        for dx in range(-radius, radius + 1)
        if max(abs(dx), abs(dy)) == radius
    ]
