"""A shared overlay never makes two photos near, whichever rule would have: a geometric fit the
content check refuses vetoes the pHash and verification rules too (a negative support), and
the audit hands hash-near large pairs to the geometric step so the check sees them."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from helpers.chrome_images import window_chrome
from helpers.overlay_images import fitted, patterned_frame, tiled_watermark
from PIL import Image

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.features.perceptual import phash
from splitaudit.indexer.match.geometric_tier import CONFIRM_CAP, shortlist
from splitaudit.indexer.match.geometry import GeometricMatch, geometric_match
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.match.verify import verify_score
from splitaudit.indexer.popcount import popcount

TH = DEFAULT_THRESHOLDS
OVERLAY_ONLY = -TH.geometry_inliers  # a refused fit of geometry_inliers inliers


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    return {name: sample_photo(name) for name in ("astronaut", "coffee", "chelsea", "rocket")}


def test_an_overlay_fit_vetoes_the_hash_and_the_verifier() -> None:
    # Near by hash and by verification, but the geometric fit was refused as an overlay.
    assert TH.classify(3, 0.9, 0.9, 300) == "near"
    assert TH.classify(3, 0.9, 0.9, 300, OVERLAY_ONLY) != "near"
    assert TH.classify(30, 0.9, 0.95, 300, OVERLAY_ONLY) != "near"
    assert TH.near_evidence(3, 0.9, 0.9, 300, OVERLAY_ONLY) == []
    mask = TH.near_mask([3, 3, 30, 3], [0.9] * 4, [0.9] * 4, [300] * 4, [np.nan, -40, 40, -5])
    assert mask.tolist() == [True, False, True, True]  # -5: too few inliers to veto anything
    # Not run (None / NaN) and no fit (0) leave the other rules as they were.
    assert TH.classify(3, 0.9, 0.9, 300, 0) == "near"


def test_large_hash_near_pairs_go_to_the_geometric_step() -> None:
    assert TH.confirms(3, 300)
    assert TH.needs_verify(3, 0.6, 300)  # verified, then shortlisted to be confirmed
    assert not TH.confirms(3, 40)  # small: the verifier decides, SIFT has too little
    assert not TH.confirms(3, None)  # unknown size
    assert not TH.confirms(20, 300)  # not near by hash
    cosines = [0.95, 0.6, 0.3, None, 0.85]
    settled = [False, True, True, True, True]
    sides = [300, 300, 300, 300, 40]
    picked = shortlist(cosines, settled, sides, TH)
    assert picked[0] == 0  # the open pair first
    assert sorted(picked[1:]) == [1, 2, 3]  # every large settled pair, never the small one
    many = shortlist([0.9] * 100, [True] * 100, [300] * 100, TH)
    assert len(many) == CONFIRM_CAP


def test_support_of_a_refused_fit_is_overlay_only() -> None:
    from splitaudit.indexer.match.content_check import ContentAgreement

    refused = ContentAgreement(score=0.2, cells=40, agreeing=8, region=(0.0, 0.0, 1.0, 0.2))
    fit = GeometricMatch(inliers=50, matches=80, scale=1.0, box=(0, 0, 1, 1), test_box=(0, 0, 1, 1))
    assert fit.support == 50
    vetoed = replace(fit, content=refused)
    assert vetoed.overlay_only and vetoed.support == -50 and not vetoed.is_copy()
    discarded = vetoed.evidence()["discarded"]
    assert discarded["inliers"] == 50 and "8 of 40" in discarded["reason"]
    # a darkened copy: its cells lose texture, its layout stays: no veto
    darkened = replace(refused, layout=0.9999)
    assert replace(fit, content=darkened).support == 0
    # inliers all over the image (a copy under a big emoji), or another alignment: no veto
    assert replace(fit, content=refused, coverage=0.9).support == 0
    assert replace(fit, content=refused, angle=10.0).support == 0
    assert replace(fit, content=refused, test_box=(0.1, 0.1, 0.9, 0.9)).support == 0
    kept = replace(refused, score=0.9, agreeing=36, layout=0.95)
    assert replace(fit, content=kept).support == 50


@pytest.mark.parametrize("overlay", [window_chrome, patterned_frame, tiled_watermark])
def test_unrelated_photos_under_one_overlay_are_never_near(
    photos: dict[str, Image.Image], overlay: object
) -> None:
    draw = overlay  # type: ignore[assignment]
    for a, b in (("coffee", "astronaut"), ("rocket", "chelsea")):
        test, corpus = draw(photos[a]), draw(photos[b])  # type: ignore[operator]
        match = geometric_match(test, corpus)
        assert not match.is_copy(TH.geometry_inliers), (overlay, a, b, match)
        if overlay is window_chrome:  # one window: the fit on the chrome is found, and vetoes
            assert match.support <= -TH.geometry_inliers, match
            assert TH.classify(2, 0.6, 0.95, 300, match.support) != "near"
        if match.plausible and match.inliers >= TH.geometry_inliers:
            assert match.overlay_only, match
        if match.overlay_only:
            # near by hash and by verification (the overlay brought both close): still not near
            if match.inliers >= TH.geometry_inliers and match.content.overlay:  # type: ignore[union-attr]
                assert TH.classify(2, 0.6, 0.95, 300, match.support) != "near"
            assert match.evidence()["discarded"]["inliers"] == match.inliers


@pytest.mark.parametrize("overlay", [window_chrome, patterned_frame, tiled_watermark])
def test_the_same_photo_under_the_overlay_stays_near(
    photos: dict[str, Image.Image], overlay: object
) -> None:
    """The overlay added to a copy: its hash, verification score and geometric fit together
    still make it near (the fit never vetoes it)."""
    draw = overlay  # type: ignore[assignment]
    for name in ("astronaut", "chelsea", "coffee"):
        plain = fitted(photos[name])
        test = draw(photos[name])  # type: ignore[operator]
        match = geometric_match(test, plain)
        assert match.support > -TH.geometry_inliers, (overlay, name, match)
        hamming = int(popcount(np.uint64(phash(test).value ^ phash(plain).value)))
        verify = verify_score(test, plain)
        side = min(*test.size, *plain.size)
        assert TH.classify(hamming, 0.6, verify, side, match.support) == "near", (
            overlay,
            name,
            hamming,
            verify,
            match,
        )
        if match.is_copy(TH.geometry_inliers):
            assert match.content is not None and not math.isnan(match.content.score)
