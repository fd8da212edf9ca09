"""The inset refit (issue 23): a small inset fitted again on a full-resolution crop of the test
image, and the crop's fit mapped back onto the whole test image."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image, ImageDraw

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.content_check import ContentAgreement, _query_beyond
from splitaudit.indexer.match.geometry import (
    MIN_INLIERS,
    WORK_SIDE,
    GeometricMatch,
    checked,
    keypoints,
    match_keypoints,
)
from splitaudit.indexer.match.inset_candidates import region_fraction
from splitaudit.indexer.match.inset_refit import (
    MIN_INLIERS as REFIT_FROM,
)
from splitaudit.indexer.match.inset_refit import (
    REGION_GAIN,
    REGION_MARGINS,
    crop_box,
    crop_fits,
    needs_refit,
    needs_region_refit,
    needs_wide_crop,
    on_whole_image,
    refit,
    refit_many,
)

CANVAS = (1280, 800)


def _screenshot(
    photo: Image.Image, fraction: float, at: tuple[int, int]
) -> tuple[Image.Image, tuple[float, ...]]:
    """``photo`` at ``fraction`` of a page-like canvas's height; the canvas and the photo's box."""
    w, h = CANVAS
    canvas = Image.new("RGB", CANVAS, (248, 248, 250))
    draw = ImageDraw.Draw(canvas)
    rng = np.random.default_rng(3)
    for y in range(40, h - 20, 24):
        draw.rectangle((20, y, 20 + int(rng.integers(200, w - 60)), y + 9), fill=(80, 80, 90))
    side = round(fraction * h)
    shown = photo.resize((side, side), Image.Resampling.LANCZOS)
    canvas.paste(shown, at)
    return canvas, (at[0] / w, at[1] / h, (at[0] + side) / w, (at[1] + side) / h)


def _fit(image: Image.Image, corpus: Image.Image) -> GeometricMatch:
    query, reference = keypoints(image, with_mirror=True), keypoints(corpus)
    found = match_keypoints(query, reference)
    return checked(found, query.mirrored if found.mirrored else query, reference)


@pytest.mark.parametrize(
    ("name", "why"),
    [("rocket", "too few inliers"), ("cell", "content check refuses it through the blur")],
)
def test_a_small_inset_left_open_on_the_reduced_decode_is_a_copy_on_the_crop(
    name: str, why: str
) -> None:
    photo = sample_photo(name).resize((384, 384))
    shot, truth = _screenshot(photo, 0.3, (820, 420))
    reduced = shot.resize((410, 256), Image.Resampling.LANCZOS)  # the ingestion's decode
    first = _fit(reduced, photo)
    assert not first.is_copy() and needs_refit(first, MIN_INLIERS), why
    again = refit(first, shot, lambda crop: _fit(crop, photo))
    assert again.is_copy() and again.support >= 5 * MIN_INLIERS
    assert np.allclose(again.test_box, truth, atol=0.01), (again.test_box, truth)
    assert again.inset and 0.28 <= again.inset_side <= 0.32
    # the region scale refers to the whole test image, as the first fit's did
    assert again.scale == pytest.approx(first.scale, rel=0.05)


def test_a_small_inset_is_a_copy_on_the_reduced_decode_when_only_its_border_disagreed() -> None:
    # The outermost cells of an inset's footprint hold the step from the photo's border to the
    # page on the test side only (content_check._query_beyond): they are left out, so this
    # camera at 30% needs no refit (content agreement 0.49 of 59 cells with them, 0.65 of 34
    # without; 0.55 decides).
    photo = sample_photo("camera").resize((384, 384))
    shot, truth = _screenshot(photo, 0.3, (820, 420))
    first = _fit(shot.resize((410, 256), Image.Resampling.LANCZOS), photo)
    assert first.inset and first.is_copy() and first.content is not None
    assert first.content.passed and not needs_refit(first, MIN_INLIERS)
    assert np.allclose(first.test_box, truth, atol=0.02), (first.test_box, truth)


def test_a_refit_that_finds_less_keeps_the_first_fit() -> None:
    first = GeometricMatch(inliers=8, matches=20, scale=3.0, test_box=(0.5, 0.5, 0.8, 0.8))
    worse = GeometricMatch(inliers=0, matches=3)
    assert refit(first, Image.new("RGB", (640, 400)), lambda crop: worse) is first


def test_only_open_plausible_inset_fits_with_a_box_are_looked_at_again() -> None:
    inset = GeometricMatch(inliers=8, matches=20, scale=3.0, test_box=(0.5, 0.5, 0.8, 0.8))
    assert needs_refit(inset, MIN_INLIERS)
    assert not needs_refit(inset, 8)  # already a copy at that many inliers
    few = GeometricMatch(inliers=REFIT_FROM - 1, matches=20, scale=3.0, test_box=inset.test_box)
    assert not needs_refit(few, MIN_INLIERS)  # no box to trust
    whole = GeometricMatch(inliers=8, matches=20, scale=1.0, test_box=(0.0, 0.0, 1.0, 1.0))
    assert not needs_refit(whole, MIN_INLIERS)  # not an inset
    turned = GeometricMatch(inliers=8, matches=20, scale=3.0, angle=45.0, test_box=inset.test_box)
    assert not needs_refit(turned, MIN_INLIERS)  # no copy is turned that much


def test_a_star_field_inset_without_a_box_on_the_reduced_decode_is_a_copy_on_its_regions_crop() -> (
    None
):
    # a sparse star field at 30%: the reduced decode keeps a few scattered inliers (no copy,
    # no box to trust); the crop of the region that nominated it finds the photo
    photo = sample_photo("hubble_deep_field").resize((384, 384))
    shot, truth = _screenshot(photo, 0.3, (820, 420))
    first = _fit(shot.resize((410, 256), Image.Resampling.LANCZOS), photo)
    assert not first.is_copy()
    # the region at the bottom right (0.55-1.0 of each side) holds the inset, its margin the
    # top edge that sticks out of it
    assert needs_region_refit(first, region_cosine=0.55, cosine=0.2, min_inliers=MIN_INLIERS)
    again = refit(first, shot, lambda crop: _fit(crop, photo), around=region_fraction(8))
    assert again.is_copy() and again.support >= 2 * MIN_INLIERS
    assert np.allclose(again.test_box, truth, atol=0.01), (again.test_box, truth)
    assert again.inset and 0.28 <= again.inset_side <= 0.32


def test_the_wide_region_crop_keeps_whole_an_inset_the_tight_one_cuts_off() -> None:
    # a star field at 30% whose top sticks out of the middle-left region (0.275-0.725 of the
    # height) by more than the tight margin: cut off, its box is too small to be a plausible
    # inset; the wide crop holds it whole
    photo = sample_photo("hubble_deep_field").resize((384, 384))
    shot, truth = _screenshot(photo, 0.3, (100, 110))
    tight, wide = REGION_MARGINS
    none = [GeometricMatch(inliers=0, matches=0)]

    def fit(crop: Image.Image) -> list[GeometricMatch]:
        return [_fit(crop, photo)]

    [cut] = crop_fits(shot, fit, region_fraction(3), tight) or []
    assert cut.inliers >= MIN_INLIERS and not cut.plausible and cut.inset_side < 0.25
    assert refit_many(none, shot, fit, region_fraction(3), tight) == none  # not kept
    [whole] = refit_many(none, shot, fit, region_fraction(3), wide)
    assert whole.is_copy() and np.allclose(whole.test_box, truth, atol=0.01)
    # the cut-off fit found the photo: the wide crop is due; a scattered few inliers are not
    assert needs_wide_crop(cut)
    assert not needs_wide_crop(GeometricMatch(inliers=3, matches=9, scale=5.0))
    assert not needs_wide_crop(whole)


def test_only_open_pairs_whose_region_beats_the_whole_image_get_the_regions_crop() -> None:
    open_fit = GeometricMatch(inliers=6, matches=20, scale=3.0, test_box=(0.5, 0.5, 0.8, 0.8))
    gain = REGION_GAIN
    assert needs_region_refit(open_fit, 0.6, 0.6 - gain, MIN_INLIERS)
    assert needs_region_refit(None, 0.6, None, MIN_INLIERS)  # no fit, no whole-image cosine
    # a photo that resembles the corpus image all over: the region is no closer than the whole
    assert not needs_region_refit(open_fit, 0.6, 0.6 - gain / 2, MIN_INLIERS)
    # unless the region is as close as the near tier's cosine (a text page in a screenshot of
    # text lines: 0.86 in its window, 0.72 the whole screenshot)
    assert needs_region_refit(open_fit, 0.86, 0.72, MIN_INLIERS, near_cosine=0.8)
    assert not needs_region_refit(open_fit, 0.79, 0.72, MIN_INLIERS, near_cosine=0.8)
    assert not needs_region_refit(open_fit, None, 0.1, MIN_INLIERS)  # no region nominated it
    copy = GeometricMatch(inliers=40, matches=50, scale=3.0, test_box=(0.5, 0.5, 0.8, 0.8))
    assert copy.is_copy() and not needs_region_refit(copy, 0.6, 0.1, MIN_INLIERS)
    # refused on the reduced decode for keypoints fits to other corpus images share (an
    # overlay pair, ``burstiness``): the crop judges it again, at full size
    refused = replace(open_fit, shared=6, shared_with=2)
    assert refused.vetoes and needs_region_refit(refused, 0.6, 0.1, MIN_INLIERS)
    # refused by the content check itself (the images aligned as they are, agreeing only on a
    # band): never again, whatever it shares; a crop of the overlay shows the overlay
    band = ContentAgreement(score=0.2, cells=40, agreeing=8, region=(0.0, 0.0, 1.0, 0.2))
    whole = (0.0, 0.0, 1.0, 1.0)
    on_overlay = GeometricMatch(
        inliers=22, matches=40, scale=1.0, box=whole, test_box=whole, content=band
    )
    assert on_overlay.vetoes and not needs_region_refit(on_overlay, 0.6, 0.1, MIN_INLIERS)
    both = replace(on_overlay, shared=6, shared_with=2)
    assert both.vetoes and not needs_region_refit(both, 0.6, 0.1, MIN_INLIERS)


def test_the_crop_widens_the_box_and_stays_on_the_image() -> None:
    assert crop_box((0.2, 0.4, 0.6, 0.6), margin=0.25) == pytest.approx((0.1, 0.35, 0.7, 0.65))
    assert crop_box((0.0, 0.9, 0.5, 1.0), margin=0.5) == pytest.approx((0.0, 0.85, 0.75, 1.0))
    with pytest.raises(ValueError, match="test box"):
        crop_box((0.5, 0.2, 0.4, 0.6))


def test_a_crops_fit_maps_back_onto_the_whole_test_image() -> None:
    size = (1000, 500)
    box = (0.4, 0.2, 0.8, 0.8)  # 400 x 300 px of the test image
    # the crop's fit: crop working px -> corpus working px, a plain scale by 2
    found = GeometricMatch(
        inliers=50,
        matches=60,
        scale=0.5,
        test_box=(0.25, 0.0, 0.75, 1.0),
        transform=(2.0, 0.0, 0.0, 0.0, 2.0, 0.0),
    )
    whole = on_whole_image(found, box, size)
    assert whole.test_box == pytest.approx((0.5, 0.2, 0.7, 0.8))
    assert whole.scale == pytest.approx(0.5 / math.sqrt(0.4 * 0.6))
    # a test pixel, in the whole image's working px, lands where the crop's fit put it
    x, y = 600.0, 250.0  # full px, inside the crop
    whole_px = np.array([x, y, 1.0]) * [WORK_SIDE / 1000, WORK_SIDE / 1000, 1.0]
    crop_px = np.array([x - 400, y - 100]) * (WORK_SIDE / 400)
    mapped = np.asarray(whole.transform).reshape(2, 3) @ whole_px
    assert np.allclose(mapped, 2.0 * crop_px)
    assert getattr(whole, "inlier_queries", None) is None
    # a fit in perspective (a photo of a screen): its homography maps the same way
    tilted = np.array([[2.0, 0.1, 3.0], [0.0, 2.0, 1.0], [0.001, 0.0, 1.0]])
    seen = on_whole_image(replace(found, perspective=tuple(tilted.ravel())), box, size)
    at = np.asarray(seen.perspective).reshape(3, 3) @ whole_px
    want = tilted @ np.r_[crop_px, 1.0]
    assert np.allclose(at[:2] / at[2], want[:2] / want[2])


def test_only_sides_where_the_test_image_goes_on_past_the_corpus_image_lose_their_ring() -> None:
    size = (192, 120)
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert _query_beyond(identity, size, size, 6.0) == (False, False, False, False)
    # the corpus image inset in a test image three times its size, a little right of centre
    inset = np.array([[3.0, 0.0, -250.0], [0.0, 3.0, -120.0]])
    assert _query_beyond(inset, size, size, 6.0) == (True, True, True, True)
    # a crop of the corpus image: the test image ends inside it on every side
    crop = np.array([[0.5, 0.0, 40.0], [0.0, 0.5, 30.0]])
    assert _query_beyond(crop, size, size, 6.0) == (False, False, False, False)
    # shifted 4 px left: within the margin, a fit's error, not a page around the photo
    shifted = np.array([[1.0, 0.0, -4.0], [0.0, 1.0, 0.0]])
    assert _query_beyond(shifted, size, size, 6.0) == (False, False, False, False)
    # a test image with a page below the photo only
    below = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert _query_beyond(below, (192, 200), size, 6.0) == (False, False, False, True)
