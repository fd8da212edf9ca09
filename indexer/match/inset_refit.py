"""A second look at an inset found on the test image's reduced decode: the fit again on a crop
of the test image at full resolution, around where the first fit put the corpus image.

The audit matches a test image geometrically from its 256-px decode (at the geometric step's
working size): a corpus photo shown at 30% of a 1280 x 800 screenshot's side is some 70 px
there. SIFT finds few keypoints on it (5-9 inliers on ``bench.recall``'s insets, under
``geometry_inliers``), and the content check compares it with the corpus image through a blur,
so a real inset copy often stays open. The first fit still says *where* the corpus image lies
on the test image (``GeometricMatch.test_box``). ``refit`` cuts that box (widened by
``MARGIN``) out of the full-resolution test image and matches the crop again: the inset is now
most of the crop, at about the corpus image's own scale (200-350 inliers on the same insets).
The refit's box is mapped back onto the whole test image, so the evidence reads as if the
whole test image had been matched. Where the first fit gives no usable box (a star field or a
blurred photo keeps a few scattered inliers on the reduced decode) but a region of the test
image nominated the pair (``inset_candidates``), that region's crop is fitted instead
(``needs_region_refit``); where the region's crop shows the inset small (a 45% window around
a 30% inset keeps a text page at ~190 px of the working size: 6-11 inliers), the crop around
the box its fit drew follows (~190 inliers). A crop of a test image is a test image: the
refit passes the same rules (inliers, plausible transform, content check) as any geometric
match.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from PIL import Image

from splitaudit.indexer.match.geometry import WORK_SIDE, Box, GeometricMatch

# A first fit is looked at again from this many inliers (fewer: no reliable box).
MIN_INLIERS = 4
MARGIN = 0.15  # of the box's width and height, added on each side of the crop
# Long side (px) at most of the test image's decode the crop is cut from: a 30% inset's crop
# (its box widened by MARGIN) is then ~500 px, more than the geometric step's working size.
DECODE_SIDE = 1280
# A pair a region nominated is fitted again on that region's crop when the region's cosine to
# the corpus image beats the whole test image's by this much. bench.recall's 30-70% insets:
# region 0.50-0.92 against the page's 0.21-0.52 (a star field, a blurred clock, whose reduced
# decode keeps 6-9 scattered inliers and a wrong box); a photo that resembles a corpus photo
# all over comes no closer in a part of it than in the whole.
REGION_GAIN = 0.15
# A region's crop is widened by these shares of its side on each side, the second only for
# the pairs the first left open: the tight crop shows the inset larger (a blurred clock at 50%:
# 13 inliers, 11 in the wide crop), the wide one keeps whole an inset whose centre lies in the
# region (a 30% inset reaches 15% of the side past a 45% region; cut off, a star field's box
# was 0.23 of the side, too small for a plausible inset).
REGION_MARGINS = (MARGIN, 1 / 3)


def needs_refit(match: GeometricMatch, min_inliers: int) -> bool:
    """Whether a fit is a plausible inset (the corpus image inside a larger test image) with a
    box to crop (``MIN_INLIERS`` or more inliers) that is not a copy yet (support under
    ``min_inliers``) and was not refused as a shared overlay."""
    return (
        match.inset
        and match.plausible
        and match.inliers >= MIN_INLIERS
        and 0 <= match.support < min_inliers
        and not match.vetoes
    )


def needs_region_refit(
    match: GeometricMatch | None,
    region_cosine: float | None,
    cosine: float | None,
    min_inliers: int,
    near_cosine: float | None = None,
) -> bool:
    """Whether a pair a region of the test image nominated (``inset_candidates``) is fitted
    again on that region's crop: its fit is no copy (too few keypoints on the reduced decode for
    a box, a wrong box, or a fit refused there for the keypoints it shares with fits to other
    corpus images, ``burstiness``: a small blurred inset agrees with none of the copies of its
    photo under different overlays that the regions nominate, and the crop judges them again
    at full size; not a fit the content check refuses, ``refused_by_content``), and the
    region comes closer to the corpus image than the whole test image does by ``REGION_GAIN``
    (an inset, not a photo that merely resembles it all over) or, where ``near_cosine`` is
    given, as close as that (a screenshot of text lines resembles a scanned page all over: a
    page at 30% reaches 0.86 in its window, the whole screenshot 0.72)."""
    if region_cosine is None:
        return False
    if match is not None and (match.support >= min_inliers or refused_by_content(match)):
        return False
    if near_cosine is not None and region_cosine >= near_cosine:
        return True  # as close as the near tier's cosine: worth a fit whatever the whole's
    return cosine is None or region_cosine - cosine >= REGION_GAIN


def refused_by_content(match: GeometricMatch) -> bool:
    """Whether the content check refuses ``match`` as a shared overlay by itself, whatever
    fits to other corpus images share with it (``GeometricMatch.vetoes`` without ``shared``):
    its inliers rest on an overlay alone (a logo, a window's chrome). Such a pair is never
    fitted again; the crop of an overlay shows the overlay."""
    return replace(match, shared=0, shared_with=0, beside_shared=None).vetoes


def needs_wide_crop(tight: GeometricMatch) -> bool:
    """Whether a pair is fitted on its region's wide crop too: the tight crop's own fit found
    the corpus image (``MIN_INLIERS`` inliers or more) yet is no plausible copy (an inset cut
    off by the crop's edge has too small a box). Unrelated pages' tight fits keep 0-6 scattered
    inliers on ``bench.inset_regions``, so most stop at one crop."""
    return tight.inliers >= MIN_INLIERS and not (tight.plausible and tight.support > 0)


def crop_box(test_box: Box, margin: float = MARGIN) -> Box:
    """``test_box`` (fractions of the test image) widened by ``margin`` of its sides, clipped."""
    x0, y0, x1, y1 = test_box
    if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
        raise ValueError(
            f"test box must be (x0, y0, x1, y1) fractions with x0 < x1, y0 < y1: {test_box}"
        )
    dx, dy = margin * (x1 - x0), margin * (y1 - y0)
    return (max(0.0, x0 - dx), max(0.0, y0 - dy), min(1.0, x1 + dx), min(1.0, y1 + dy))


def refit(
    match: GeometricMatch,
    full: Image.Image,
    fit: Callable[[Image.Image], GeometricMatch],
    around: Box | None = None,
) -> GeometricMatch:
    """The better of ``match`` and ``fit`` of the crop of ``full`` (the test image, as large as
    it was decoded) around ``around`` (default ``match.test_box``; fractions of the test
    image), the latter mapped back to the whole test image. ``fit``: the geometric match of an
    image against the pair's corpus image."""
    box = match.test_box if around is None else around
    return refit_many([match], full, lambda crop: [fit(crop)], box)[0]


def refit_many(
    matches: Sequence[GeometricMatch],
    full: Image.Image,
    fit: Callable[[Image.Image], Sequence[GeometricMatch]],
    around: Box,
    margin: float = MARGIN,
) -> list[GeometricMatch]:
    """``refit`` of several pairs of one test image on one crop (around ``around``, widened by
    ``margin``): ``fit(crop)`` matches the crop against each pair's corpus image, in order (the
    crop's keypoints found once for all of them); each pair keeps the better fit."""
    found = crop_fits(full, fit, around, margin)
    if found is None:
        return list(matches)
    return [better(match, again) for match, again in zip(matches, found, strict=True)]


def crop_fits(
    full: Image.Image,
    fit: Callable[[Image.Image], Sequence[GeometricMatch]],
    around: Box,
    margin: float = MARGIN,
) -> list[GeometricMatch] | None:
    """``fit`` of the crop of ``full`` around ``around`` (widened by ``margin``), each fit mapped
    back onto the whole test image (``on_whole_image``: a fit is judged as a fit of the test
    image, an inset cut off by the crop's edge by its cut box); None for a crop under 8 px."""
    box = crop_box(around, margin)
    w, h = full.size
    pixels = (round(box[0] * w), round(box[1] * h), round(box[2] * w), round(box[3] * h))
    if pixels[2] - pixels[0] < 8 or pixels[3] - pixels[1] < 8:
        return None
    return [on_whole_image(again, box, full.size) for again in fit(full.crop(pixels))]


def better(match: GeometricMatch, again: GeometricMatch) -> GeometricMatch:
    """``again`` where its support beats ``match``'s, else ``match`` (ties keep the first)."""
    return again if again.support > match.support else match


def on_whole_image(found: GeometricMatch, box: Box, size: tuple[int, int]) -> GeometricMatch:
    """A fit of the crop ``box`` (fractions) of a ``size`` test image, as a fit of the whole:
    its test box, region scale and transform (from the whole image's working pixels)."""
    x0, y0, x1, y1 = box
    bw, bh = x1 - x0, y1 - y0
    tx0, ty0, tx1, ty1 = found.test_box
    test_box = (x0 + tx0 * bw, y0 + ty0 * bh, x0 + tx1 * bw, y0 + ty1 * bh)
    transform, perspective = found.transform, found.perspective
    if len(transform) == 6:
        w, h = size
        to_whole = WORK_SIDE / max(w, h)  # full px -> the whole image's working px
        to_crop = WORK_SIDE / max(bw * w, bh * h)  # full px -> the crop's working px
        # whole working px u -> full px u / to_whole -> crop px - origin -> crop working px
        k = to_crop / to_whole
        moved = np.array([[k, 0.0, -x0 * w * to_crop], [0.0, k, -y0 * h * to_crop], [0, 0, 1.0]])
        matrix = np.asarray(transform, np.float64).reshape(2, 3) @ moved
        transform = tuple(float(v) for v in matrix.ravel())
        if len(perspective) == 9:
            square = np.asarray(perspective, np.float64).reshape(3, 3) @ moved
            perspective = tuple(float(v) for v in square.ravel())
    # keypoint indices of the crop's, where the fit keeps them, mean nothing on the whole image
    whole = replace(
        found,
        test_box=test_box,
        scale=found.scale / math.sqrt(bw * bh),  # the whole test image mapped into the corpus
        transform=transform,
        perspective=perspective,
    )
    if getattr(whole, "inlier_queries", None) is not None:
        object.__setattr__(whole, "inlier_queries", None)  # a fresh copy: not shared
    return whole
