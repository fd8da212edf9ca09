"""A large pair near by the pixel verifier alone, whose geometric fit left nothing to check:
compared whole, two photos under one window chrome agree only on it (the verifier's verdict is
refused); a copy agrees almost everywhere (kept)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers.chrome_images import window_chrome
from PIL import Image, ImageOps

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.content_check import whole_agreement
from splitaudit.indexer.match.geometry import GeometricMatch
from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS as TH
from splitaudit.indexer.match.verify_overlay import needs_whole_check, refuse_overlay_verdicts


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    return {n: sample_photo(n) for n in ("astronaut", "chelsea", "rocket", "coffee")}


def _gray(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("L"))


def _recoded(image: Image.Image, scale: float = 0.8, quality: int = 60) -> Image.Image:
    """A re-scraped copy: smaller, re-encoded."""
    small = image.resize((round(image.width * scale), round(image.height * scale)))
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def _junk_fit() -> GeometricMatch:
    """What the geometric step found for the pairs of the bench: 3 scattered inliers."""
    return GeometricMatch(inliers=3, matches=40, scale=3.7, angle=-57.0)


def test_whole_agreement_tells_a_copy_from_another_photo_in_the_same_window(
    photos: dict[str, Image.Image],
) -> None:
    page = window_chrome(photos["coffee"])
    copy = whole_agreement(_gray(_recoded(page)), _gray(page))
    assert copy is not None and copy.passed and copy.score >= 0.8
    for other in ("astronaut", "chelsea", "rocket"):
        shared = whole_agreement(_gray(window_chrome(photos[other])), _gray(page))
        assert shared is not None and shared.overlay, other  # only the chrome agrees
    mirrored = whole_agreement(_gray(ImageOps.mirror(_recoded(page))), _gray(page), mirrored=True)
    assert mirrored is not None and mirrored.passed


def _pair(item_id: int, **kw: object) -> Pair:
    base: dict[str, object] = {
        "cosine": 0.71,
        "verify": 0.742,
        "min_side": 330,
        "geometry": _junk_fit(),
    }
    return Pair(row=0, item_id=item_id, **{**base, **kw})  # type: ignore[arg-type]


def test_a_verdict_on_the_chrome_alone_is_refused(photos: dict[str, Image.Image]) -> None:
    corpus = {1: window_chrome(photos["astronaut"]), 2: _recoded(window_chrome(photos["coffee"]))}
    query = window_chrome(photos["coffee"])
    other, copy = _pair(1), _pair(2)
    assert needs_whole_check(other, TH) and TH.is_near(None, 0.71, 0.742, 330, 0)
    assert refuse_overlay_verdicts([other, copy], query, corpus.get, TH) == 1
    assert other.verify is None and other.refused_verify == pytest.approx(0.742)
    assert not TH.is_near(other.hamming, other.cosine, other.verify, other.min_side, 0)
    refused = other.evidence()["verify_refused"]
    assert refused["verify_score"] == 0.742 and refused["whole_agreement"] < 0.55
    assert "overlay" in refused["reason"]
    assert copy.verify == pytest.approx(0.742) and copy.refused_verify is None  # a copy stays


def test_only_large_pairs_near_by_the_verifier_alone_are_compared_whole() -> None:
    assert needs_whole_check(_pair(1), TH)
    assert not needs_whole_check(_pair(1, hamming=4), TH)  # near by its pHash too
    assert not needs_whole_check(_pair(1, min_side=64), TH)  # a thumbnail: the verifier decides
    assert not needs_whole_check(_pair(1, verify=0.5), TH)  # not near at all
    assert not needs_whole_check(_pair(1, orientation="rot90"), TH)  # not the verifier's frame


def test_a_copy_inside_a_border_agrees_at_the_verifiers_zoom(
    photos: dict[str, Image.Image],
) -> None:
    """A copy with a plain border (the verifier finds it zoomed by 1.2-1.45) is not refused."""
    photo = photos["coffee"]
    padded = ImageOps.expand(photo, border=photo.width // 7, fill=(250, 250, 250))
    agreement = whole_agreement(_gray(padded), _gray(photo))
    assert agreement is not None and agreement.passed


def test_a_fit_of_many_inliers_keeps_the_verdict_though_its_content_check_doubted() -> None:
    """A re-uploaded cell texture: 257 inliers, content agreement 0.54 (refused), verifier 0.93:
    SIFT found shared structure, so the whole comparison (which a re-upload fails) is not asked."""
    many = GeometricMatch(inliers=257, matches=400, scale=0.9, angle=2.0)
    assert not needs_whole_check(_pair(1, geometry=many), TH)
