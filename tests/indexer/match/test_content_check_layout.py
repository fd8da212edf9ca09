"""A fit of two images aligned as they are rests on content only when the agreeing cells'
brightness layouts agree too and some inliers sit in the middle: a semi-transparent watermark
tiled over two smooth photos, or caption bands around two photos, is refused although the
content check passes; copies (re-encoded, darkened, the watermark removed) stay copies."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from helpers.overlay_images import SIZE, fitted, tiled_watermark
from PIL import Image, ImageDraw, ImageEnhance, ImageFont

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import content_check
from splitaudit.indexer.match.content_check import AGREEING_LAYOUT, _rank_correlation
from splitaudit.indexer.match.geometry import MIN_INLIERS, geometric_match
from splitaudit.indexer.reporting.evidence_lines import evidence_lines


def _corner(name: str) -> Image.Image:
    photo = sample_photo(name)
    return photo.crop((0, 0, photo.width // 2, photo.height // 2))


@pytest.fixture(scope="module")
def smooth() -> dict[str, Image.Image]:
    """Smooth photos: the top-left quarters of the rocket, the cell, the clock, the moon."""
    return {name: _corner(name) for name in ("rocket", "cell", "clock", "moon")}


def _jpeg(image: Image.Image, quality: int = 85) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return Image.open(buffer).convert("RGB")


def caption_bands(photo: Image.Image) -> Image.Image:
    """White bands above and below the photo with the same black caption (a meme template)."""
    w, h = SIZE
    band = 60
    out = Image.new("RGB", (w, h + 2 * band), (255, 255, 255))
    out.paste(fitted(photo), (0, band))
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default(size=30)
    for text, y in (("ME AFTER THE AUDIT", 14), ("THE TEST SET WAS CLEAN", h + band + 14)):
        x0, _, x1, _ = draw.textbbox((0, 0), text, font=font)
        draw.text(((w - (x1 - x0)) / 2, y), text, font=font, fill=(0, 0, 0))
    return out


def test_rank_correlation_is_blind_to_brightness_and_contrast() -> None:
    rng = np.random.default_rng(0)
    levels = rng.uniform(0, 255, 40).astype(np.float32)
    brighter = np.clip(0.6 * levels + 40, 0, 255).astype(np.float32)
    assert _rank_correlation(levels, brighter) == pytest.approx(1.0)
    assert _rank_correlation(levels, -levels) == pytest.approx(-1.0)
    other = rng.uniform(0, 255, 40).astype(np.float32)
    assert abs(_rank_correlation(levels, other) or 0.0) < 0.5
    # too few cells, or a flat series: nothing to judge on
    assert _rank_correlation(levels[:5], brighter[:5]) is None
    assert _rank_correlation(levels, np.full(40, 7.0, np.float32)) is None


@pytest.mark.parametrize(("test", "corpus"), [("rocket", "cell"), ("rocket", "clock")])
def test_smooth_photos_under_one_tiled_watermark_are_refused(
    smooth: dict[str, Image.Image], test: str, corpus: str
) -> None:
    match = geometric_match(tiled_watermark(smooth[test]), tiled_watermark(smooth[corpus]))
    # the watermark's strokes agree cell by cell: the content check alone would pass the fit
    assert match.inliers >= MIN_INLIERS and match.plausible and match.aligned
    assert match.content is not None and match.content.passed
    # but the brightness under the strokes is another photo's
    assert match.content.agreeing_layout is not None
    assert match.content.agreeing_layout < AGREEING_LAYOUT
    assert match.on_template and match.overlay_only and not match.is_copy()
    # unrelated layouts (< TEXTURE_VETO): the watermark, which also dominates the thumbnails,
    # vetoes the hash and verifier rules too
    assert match.content.texture_overlay and match.vetoes
    assert match.support == -match.inliers
    # a milder disagreement refuses the fit without vetoing (a copy whose overlay was removed
    # keeps its hash rules)
    milder = replace(match, content=replace(match.content, agreeing_layout=0.7))
    assert milder.on_template and not milder.vetoes and milder.support == 0
    evidence = match.evidence()
    assert evidence["content"]["agreeing_layout"] < AGREEING_LAYOUT
    reason = evidence["discarded"]["reason"]
    assert evidence["discarded"]["inliers"] == match.inliers
    assert reason.startswith("overlay:") and "texture only" in reason
    lines = evidence_lines({"near_rules": [], "geometry": evidence})
    assert any(f"{match.inliers} keypoint matches discarded" in line for line in lines), lines


def test_without_the_layout_test_a_smooth_pair_would_be_a_copy(
    smooth: dict[str, Image.Image], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(content_check, "AGREEING_LAYOUT", -2.0)
    match = geometric_match(tiled_watermark(smooth["rocket"]), tiled_watermark(smooth["cell"]))
    assert match.is_copy(), match


@pytest.mark.parametrize("name", ["rocket", "cell", "clock", "moon"])
def test_copies_of_a_smooth_watermarked_photo_stay_copies(
    smooth: dict[str, Image.Image], name: str
) -> None:
    marked = tiled_watermark(smooth[name])
    darker = ImageEnhance.Brightness(marked).enhance(0.6)
    for copy in (_jpeg(marked), darker):
        match = geometric_match(copy, marked)
        assert match.is_copy(), match
        assert not match.on_template and match.central
        assert match.content is not None
        assert (match.content.agreeing_layout or 0.0) >= AGREEING_LAYOUT


@pytest.mark.parametrize(("test", "corpus"), [("coffee", "astronaut"), ("chelsea", "camera")])
def test_unrelated_photos_in_one_caption_template_are_not_copies(test: str, corpus: str) -> None:
    match = geometric_match(caption_bands(sample_photo(test)), caption_bands(sample_photo(corpus)))
    assert not match.is_copy(), match
    if match.plausible and match.inliers >= MIN_INLIERS:
        assert match.overlay_only and match.support <= 0
        assert "overlay" in match.evidence()["discarded"]["reason"]


def test_a_fit_with_no_inlier_in_the_middle_is_refused_as_a_template() -> None:
    """The band rule on its own: a fit at the identity whose check passed, inliers only around
    the middle; the same fit with one inlier in the middle counts."""
    photo = caption_bands(sample_photo("coffee"))
    copy = geometric_match(_jpeg(photo), photo)
    assert copy.is_copy() and copy.aligned and copy.central
    around = replace(copy, central=0)
    assert around.on_template and around.support == 0
    assert "none in the middle" in around.evidence()["discarded"]["reason"]
    assert replace(copy, central=1).support == copy.support


def test_the_same_photo_without_its_caption_bands_stays_a_copy() -> None:
    photo = sample_photo("astronaut")
    match = geometric_match(fitted(photo), caption_bands(photo))
    assert match.is_copy() and not match.on_template, match
