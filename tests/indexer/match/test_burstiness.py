"""Query-time burstiness: the test keypoints that fits to several different corpus images rest on
are a shared overlay; a fit standing on them is refused and vetoes the pair, while copies of
one photo (however many the corpus holds) stay near."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers.chrome_images import window_chrome
from helpers.overlay_images import fitted, patterned_frame, tiled_watermark
from PIL import Image

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import geometry
from splitaudit.indexer.match.burstiness import discount_shared
from splitaudit.indexer.match.geometry import GeometricMatch, Keypoints, keypoints, match_many
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.reporting.evidence_lines import evidence_lines

TH = DEFAULT_THRESHOLDS


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    names = ("astronaut", "coffee", "chelsea", "rocket", "camera", "retina")
    return {name: sample_photo(name) for name in names}


def _fits(query: Image.Image, corpus: list[Image.Image]) -> list[GeometricMatch]:
    """The fits of ``query`` to ``corpus``, before and after the discount."""
    q = keypoints(query, with_mirror=True)
    refs: list[Keypoints | None] = [keypoints(c) for c in corpus]
    return discount_shared(q, refs, match_many(q, [r for r in refs if r is not None]))


@pytest.mark.parametrize("overlay", [tiled_watermark, patterned_frame, window_chrome])
def test_unrelated_photos_under_one_overlay_are_refused_and_vetoed(
    photos: dict[str, Image.Image], overlay
) -> None:
    corpus = [overlay(photos[n]) for n in ("astronaut", "chelsea", "rocket", "camera")]
    fits = _fits(overlay(photos["coffee"]), corpus)
    for fit in fits:
        assert not fit.is_copy(TH.geometry_inliers), fit
        assert fit.support < TH.geometry_inliers
    vetoing = [f for f in fits if f.on_shared]
    assert vetoing, [(f.inliers, f.shared, f.shared_with) for f in fits]
    for fit in vetoing:
        assert fit.vetoes and fit.support == -fit.inliers and fit.shared_with >= 1
        assert fit.beside_shared is not None and fit.beside_shared < 0.5
        reason = fit.evidence()["discarded"]["reason"]
        assert reason.startswith(f"overlay: {fit.shared} of {fit.inliers} inliers on keypoints")
        assert f"shared with {fit.shared_with} other corpus image" in reason
    # window chrome: every fit rests on 100+ chrome inliers, all of them shared
    if overlay is window_chrome:
        assert all(f.on_shared and f.support <= -TH.geometry_inliers for f in fits)
    # the report's lines (HTML, pair view) say how many matches were discarded, and why
    lines = evidence_lines({"near_rules": [], "geometry": vetoing[0].evidence()})
    said = f"{vetoing[0].inliers} keypoint matches discarded: overlay: {vetoing[0].shared} of"
    assert any(line.startswith(said) and "shared with" in line for line in lines), lines


def test_three_copies_of_one_photo_stay_near(photos: dict[str, Image.Image]) -> None:
    """A corpus holding the same watermarked photo three times (and two others under the same
    watermark): the copies' fits share all their keypoints, but the copies agree with each
    other (and the test image with them), so nothing counts as shared for them."""
    copy = tiled_watermark(photos["astronaut"])
    others = [tiled_watermark(photos[n]) for n in ("chelsea", "rocket")]
    fits = _fits(copy, [copy, copy.copy(), copy.copy(), *others])
    for fit in fits[:3]:
        assert fit.is_copy(TH.geometry_inliers) and not fit.vetoes
        assert fit.shared == 0 and fit.support == fit.inliers > 100
        assert TH.classify(0, 0.99, 1.0, 300, fit.support) == "near"
    for fit in fits[3:]:
        assert fit.vetoes and fit.support <= -TH.geometry_inliers
    # the same photo without the watermark: its fits rest on content, nothing is shared
    clean = _fits(fitted(photos["astronaut"]), [copy, copy.copy(), copy.copy(), *others])
    assert all(f.is_copy(TH.geometry_inliers) and f.shared == 0 for f in clean[:3])


def test_a_copy_under_the_overlay_keeps_its_inliers(photos: dict[str, Image.Image]) -> None:
    """The copy's fit shares the chrome's keypoints with the fits to the other photos, but the
    test image agrees with the copy where the copy and the others differ: no overlay pair."""
    corpus = [window_chrome(photos[n]) for n in ("astronaut", "chelsea", "rocket")]
    fits = _fits(window_chrome(photos["astronaut"]), corpus)
    copy, *unrelated = fits
    assert copy.shared == 0 and copy.support == copy.inliers > 100
    assert copy.is_copy(TH.geometry_inliers) and not copy.vetoes
    assert "discarded" not in copy.evidence() and "shared" not in copy.evidence()
    for fit in unrelated:
        assert fit.vetoes and fit.shared >= 100
        assert fit.evidence()["shared"]["inliers"] == fit.shared


def test_fits_without_pixels_or_indices_are_kept_as_they_are(
    photos: dict[str, Image.Image],
) -> None:
    corpus = [window_chrome(photos[n]) for n in ("astronaut", "chelsea", "rocket")]
    q = keypoints(window_chrome(photos["coffee"]), with_mirror=True)
    refs = [replace(keypoints(c), pixels=None) for c in corpus]
    matches = match_many(q, refs)
    assert discount_shared(q, refs, matches) == matches
    assert all(m.shared == 0 for m in discount_shared(q, refs, matches))
    unindexed = [replace(m, inlier_queries=None) for m in match_many(q, refs)]
    assert [m.shared for m in discount_shared(q, [None, *refs[1:]], unindexed)] == [0, 0, 0]


def test_inlier_indices_are_the_query_keypoints_of_the_inliers(
    photos: dict[str, Image.Image],
) -> None:
    q = keypoints(fitted(photos["chelsea"]), with_mirror=True)
    ref = keypoints(photos["chelsea"].crop((50, 20, 400, 280)))
    (fit,) = match_many(q, [ref])
    assert fit.inlier_queries is not None and fit.inlier_points is not None
    assert len(fit.inlier_queries) == fit.inliers == len(fit.inlier_points)
    assert len(set(fit.inlier_queries.tolist())) == fit.inliers  # one match per keypoint
    side = q.mirrored if fit.mirrored else q
    assert side is not None
    mapped = (
        np.c_[side.points[fit.inlier_queries], np.ones(fit.inliers)]
        @ np.reshape(fit.transform, (2, 3)).T
    )
    tolerance = geometry.RANSAC_PX * max(ref.width, ref.height)
    assert np.all(np.hypot(*(mapped - fit.inlier_points).T) <= tolerance + 1e-3)


def test_mismatched_lengths_are_an_error(photos: dict[str, Image.Image]) -> None:
    q = keypoints(fitted(photos["coffee"]), with_mirror=True)
    with pytest.raises(ValueError, match="one match per reference"):
        discount_shared(q, [None, None], [geometry.NO_MATCH])


def test_copies_of_a_smooth_photo_under_different_overlays_stay_copies(
    photos: dict[str, Image.Image],
) -> None:
    """The plain photo against two corpus copies under different overlays: the copies' fits
    share the photo's keypoints and the copies differ where their overlays are, but there the
    test image agrees with one or the other: not an overlay pair."""
    rocket = photos["rocket"]
    corpus = [tiled_watermark(rocket), window_chrome(rocket), tiled_watermark(photos["coffee"])]
    fits = _fits(fitted(rocket), corpus)
    before = match_many(keypoints(fitted(rocket), with_mirror=True), [keypoints(c) for c in corpus])
    for fit, plain in zip(fits[:2], before[:2], strict=True):
        assert fit.shared == 0 and fit.support == plain.support
    assert fits[1].is_copy(TH.geometry_inliers)  # (under the tiled watermark: too smooth)


def test_three_way_counts_where_the_corpus_images_differ(photos: dict[str, Image.Image]) -> None:
    from splitaudit.indexer.match.content_check import three_way

    a = keypoints(tiled_watermark(photos["chelsea"]))
    b = keypoints(tiled_watermark(photos["camera"]))
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert a.pixels is not None and b.pixels is not None
    size = (a.width, a.height)
    same = three_way(a.pixels, size, a.pixels, size, a.pixels, size, identity, identity)
    assert same is not None and same.differing == 0 and same.neither == 0.0
    other = keypoints(tiled_watermark(photos["coffee"]))
    assert other.pixels is not None
    found = three_way(other.pixels, size, a.pixels, size, b.pixels, size, identity, identity)
    assert found is not None and found.differing >= 10 and found.neither >= 0.5
    copy = three_way(a.pixels, size, a.pixels, size, b.pixels, size, identity, identity)
    assert copy is not None and copy.with_a == copy.differing and copy.neither == 0.0
    far = np.array([[1.0, 0.0, 5000.0], [0.0, 1.0, 0.0]])
    assert three_way(a.pixels, size, a.pixels, size, b.pixels, size, far, identity) is None


def test_a_plain_photo_agrees_with_one_overlay_or_the_other(
    photos: dict[str, Image.Image],
) -> None:
    """Two copies of one photo under different overlays differ where either overlay is; the
    plain photo agrees with the other copy in each such cell: not an overlay pair."""
    from splitaudit.indexer.match.content_check import three_way

    plain = keypoints(fitted(photos["chelsea"])).pixels
    assert plain is not None
    a, b = plain.copy(), plain.copy()
    a[10:60, 10:80] = 255  # one overlay's patch
    b[80:130, 100:180] = 0  # the other's
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    size = (plain.shape[1] * 2, plain.shape[0] * 2)  # working size: twice the kept pixels
    found = three_way(plain, size, a, size, b, size, identity, identity)
    assert found is not None and found.differing >= 4
    assert found.with_a and found.with_b and found.with_either == found.differing
    assert found.neither == 0.0
