"""Geometric verification rests on shared content: a shared overlay alone is refused, a copy
under an overlay is kept, and a corpus image inset in a larger test image is located on it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers.overlay_images import fitted, inset, patterned_frame, tiled_watermark
from PIL import Image

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import content_check, geometry
from splitaudit.indexer.match.geometric_tier import GeometricTier
from splitaudit.indexer.match.geometry import (
    MIN_INLIERS,
    GeometricMatch,
    geometric_match,
    keypoints,
)
from splitaudit.indexer.match.verify_store import VerifyStore


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    return {name: sample_photo(name) for name in ("astronaut", "coffee", "chelsea", "rocket")}


@pytest.mark.parametrize("overlay", [tiled_watermark, patterned_frame])
@pytest.mark.parametrize(("test", "corpus"), [("coffee", "astronaut"), ("rocket", "chelsea")])
def test_unrelated_photos_under_one_overlay_are_not_a_copy(
    photos: dict[str, Image.Image], overlay: object, test: str, corpus: str
) -> None:
    draw = overlay  # type: ignore[assignment]
    match = geometric_match(draw(photos[test]), draw(photos[corpus]))  # type: ignore[operator]
    assert not match.is_copy(), match
    if match.inliers >= MIN_INLIERS and match.plausible:
        # The fit found the overlay; the content check refused it and says so.
        assert match.overlay_only
        evidence = match.evidence()
        assert evidence["discarded"]["inliers"] == match.inliers
        assert "overlay" in evidence["discarded"]["reason"]
        assert evidence["content"]["agreement"] < content_check.MIN_AGREEMENT


def test_without_the_content_check_the_overlay_would_be_a_copy(
    photos: dict[str, Image.Image], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared overlays do give fits: without the check some would be called copies."""
    pairs = [
        (overlay(photos[a]), overlay(photos[b]))
        for overlay in (tiled_watermark, patterned_frame)
        for a, b in (("coffee", "astronaut"), ("rocket", "chelsea"), ("chelsea", "coffee"))
    ]
    assert not any(geometric_match(q, r).is_copy() for q, r in pairs)
    monkeypatch.setattr(geometry, "CHECK_FROM", 10**9)
    assert any(geometric_match(q, r).is_copy() for q, r in pairs)


@pytest.mark.parametrize("name", ["astronaut", "coffee"])
def test_same_photo_with_and_without_the_watermark_is_a_copy(
    photos: dict[str, Image.Image], name: str
) -> None:
    match = geometric_match(fitted(photos[name]), tiled_watermark(photos[name]))
    assert match.is_copy(), match
    assert match.content is not None and match.content.passed
    region = match.evidence()["content"]["region"]
    assert region[2] - region[0] > 0.7 and region[3] - region[1] > 0.7  # most of the photo


def test_a_watermark_with_an_opaque_footer_never_vetoes_the_copy(
    photos: dict[str, Image.Image],
) -> None:
    """chelsea's dark photo under the footer bar: the coarse layouts differ (r ~0.55), so the
    fit is not counted, but the cells agree, so it vetoes nothing: the verifier's near holds."""
    match = geometric_match(fitted(photos["chelsea"]), tiled_watermark(photos["chelsea"]))
    assert match.content is not None and not match.content.overlay
    assert match.support >= 0
    assert match.content.score >= content_check.MIN_AGREEMENT


def test_same_photo_with_the_frame_swapped_for_the_watermark_is_a_copy(
    photos: dict[str, Image.Image],
) -> None:
    match = geometric_match(
        patterned_frame(photos["astronaut"]), tiled_watermark(photos["astronaut"])
    )
    assert match.is_copy(), match


@pytest.mark.parametrize("fraction", [0.3, 0.4, 0.6])
def test_corpus_photo_inset_in_a_larger_test_image_is_located_on_it(
    photos: dict[str, Image.Image], fraction: float
) -> None:
    canvas, pasted = inset(photos["chelsea"], fraction, (520 - round(fraction * 400), 120))
    match = geometric_match(canvas, photos["chelsea"])
    assert match.is_copy(), match
    assert match.inset and match.scale > 1.0
    assert match.test_box == pytest.approx(pasted, abs=0.02)
    evidence = match.evidence()
    assert evidence["inset"] is True
    assert evidence["test_box"] == [round(v, 4) for v in match.test_box]


def test_unrelated_photo_inset_in_the_same_canvas_is_not_a_copy(
    photos: dict[str, Image.Image],
) -> None:
    canvas, _ = inset(photos["rocket"], 0.4, (400, 150))
    assert not geometric_match(canvas, photos["chelsea"]).is_copy()


def test_content_agreement_of_identical_and_unrelated_pixels() -> None:
    rng = np.random.default_rng(0)
    smooth = rng.normal(128, 40, (48, 64)).astype(np.float32)
    pixels = np.asarray(Image.fromarray(smooth.clip(0, 255).astype(np.uint8)).resize((192, 144)))
    other = np.asarray(
        Image.fromarray(rng.normal(128, 40, (48, 64)).clip(0, 255).astype(np.uint8)).resize(
            (192, 144)
        )
    )
    identity = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    same = content_check.content_agreement(pixels, (384, 288), pixels, (384, 288), identity)
    assert same is not None and same.score == 1.0 and same.passed
    assert same.region == pytest.approx((0.0, 0.0, 1.0, 1.0), abs=0.1)
    unrelated = content_check.content_agreement(other, (384, 288), pixels, (384, 288), identity)
    assert unrelated is not None and unrelated.score < 0.3 and not unrelated.passed
    far = np.array([[1.0, 0, 1000.0], [0, 1.0, 0]])  # no overlap
    assert content_check.content_agreement(pixels, (384, 288), pixels, (384, 288), far) is None


def test_flat_overlap_is_not_refused() -> None:
    flat = np.full((144, 192), 90, np.uint8)
    identity = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    result = content_check.content_agreement(flat, (384, 288), flat, (384, 288), identity)
    assert result is not None and result.cells == 0 and result.passed


def test_the_store_keeps_the_pixels_beside_the_keypoints(
    photos: dict[str, Image.Image], tmp_path: Path
) -> None:
    found = keypoints(photos["rocket"])
    store = VerifyStore(tmp_path / "verify.sqlite", cap_bytes=1 << 26)
    store.put_keypoints("digest", found)
    store.flush()
    stored = store.keypoints(["digest"])["digest"]
    assert stored.pixels is not None and found.pixels is not None
    np.testing.assert_array_equal(stored.pixels, found.pixels)


def test_keypoints_without_pixels_get_them_for_the_check(
    photos: dict[str, Image.Image], tmp_path: Path
) -> None:
    """Keypoints read back without pixels (a store entry missing them): the tier loads the
    corpus image for a fit that would count, and the overlay is still refused."""
    corpus = tiled_watermark(photos["astronaut"])
    query = tiled_watermark(photos["coffee"])
    store = VerifyStore(tmp_path / "verify.sqlite", cap_bytes=1 << 26)
    store.put_keypoints("digest", replace(keypoints(corpus), pixels=None))
    store.flush()
    assert store.keypoints(["digest"])["digest"].pixels is None
    loads: list[int] = []

    def load(item_id: int) -> Image.Image:
        loads.append(item_id)
        return corpus

    tier = GeometricTier(threads=1, store=store)
    [match] = tier.match(query, [7], load, {7: "digest"})
    tier.close()
    fresh = geometric_match(query, corpus)
    assert isinstance(match, GeometricMatch)
    assert match.support == fresh.support <= 0  # -1: refused as an overlay
    assert match.overlay_only == fresh.overlay_only
    if fresh.overlay_only:
        assert loads == [7]


def test_keypoints_are_spread_so_a_frame_does_not_take_them_all(
    photos: dict[str, Image.Image],
) -> None:
    """A patterned frame has the strongest corners of the image; the photo inside still gets
    its share of keypoints, so a copy with the frame added is found."""
    framed = patterned_frame(photos["astronaut"])
    found = keypoints(framed)
    w, h = found.width, found.height
    inside = (
        (found.points[:, 0] > 0.15 * w)
        & (found.points[:, 0] < 0.85 * w)
        & (found.points[:, 1] > 0.15 * h)
        & (found.points[:, 1] < 0.85 * h)
    )
    assert inside.sum() >= 100
    assert geometric_match(fitted(photos["astronaut"]), framed).is_copy()
