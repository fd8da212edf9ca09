"""Overlay-only pairs are not semantic either unless their content is similar (issue 22): a
pair whose geometric fit was refused as an overlay at the identity alignment is semantic only
if the content region (away from the inliers, the same box on both sides) embeds close too."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from helpers.chrome_images import window_chrome
from helpers.overlay_images import patterned_frame
from PIL import Image, ImageEnhance, ImageFilter

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.content_region import (
    MIN_SIDE,
    content_box,
    content_cosine,
    needs_content,
)
from splitaudit.indexer.match.geometry import geometric_match, working_size
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS

TH = DEFAULT_THRESHOLDS
# A whole-image cosine the overlay alone can bring two unrelated photos to (the family bench
# measures 0.70-0.75 for photos in one window or frame); semantic by the plain rule.
OVERLAY_COSINE = TH.semantic_cosine + 0.05


def thumbnail_embed(images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
    """A small deterministic stand-in for the split's embedder: the 16 x 16 RGB thumbnail,
    centred, L2-normalised."""
    rows = []
    for image in images:
        a = np.asarray(image.convert("RGB").resize((16, 16), Image.Resampling.BILINEAR), np.float64)
        a = a.ravel() - a.mean()
        rows.append(a / np.linalg.norm(a))
    return np.asarray(rows, np.float32)


def reshot(photo: Image.Image) -> Image.Image:
    """The same scene taken again: slightly cropped, out of focus, darker."""
    rgb = photo.convert("RGB")
    w, h = rgb.size
    cropped = rgb.crop((int(0.06 * w), int(0.04 * h), int(0.97 * w), int(0.99 * h))).resize((w, h))
    return ImageEnhance.Brightness(cropped.filter(ImageFilter.GaussianBlur(10))).enhance(0.85)


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    return {name: sample_photo(name) for name in ("astronaut", "coffee", "chelsea", "rocket")}


def test_the_content_box_is_what_the_inliers_leave() -> None:
    w, h = 384, 288
    rng = np.random.default_rng(0)
    # inliers on a frame 1/8 of the side thick: the box is the inside
    ring = rng.uniform((0, 0), (w, h), (2000, 2)).astype(np.float32)
    inner = (ring[:, 0] > w / 8) & (ring[:, 0] < 7 * w / 8)
    inner &= (ring[:, 1] > h / 8) & (ring[:, 1] < 7 * h / 8)
    assert content_box(ring[~inner], w, h) == (0.125, 0.125, 0.875, 0.875)
    # a title bar (top eighth): the rest of the image
    bar = rng.uniform((0, 0), (w, h / 8 - 1), (60, 2)).astype(np.float32)
    assert content_box(bar, w, h) == (0.0, 0.125, 1.0, 1.0)
    # inliers all over (a tiled watermark): no content region is left
    assert content_box(ring, w, h) is None
    # inliers in the middle only: not an overlay around the content
    middle = rng.uniform((w * 0.4, h * 0.4), (w * 0.6, h * 0.6), (50, 2)).astype(np.float32)
    assert content_box(middle, w, h) is None
    box = content_box(ring[~inner], w, h)
    assert box is not None and min(box[2] - box[0], box[3] - box[1]) >= MIN_SIDE
    assert working_size(800, 600) == (384, 288)


def test_the_semantic_rule_with_a_content_cosine() -> None:
    cos, ham, ver, side = [OVERLAY_COSINE] * 3, [40] * 3, [0.1] * 3, [300] * 3
    content = [np.nan, TH.semantic_cosine - 0.2, TH.semantic_cosine + 0.1]
    plain = TH.semantic_mask(ham, cos, ver, side, [0, -40, 0])
    assert plain.tolist() == [True, True, True]
    gated = TH.semantic_mask(ham, cos, ver, side, [0, -40, 0], content)
    assert gated.tolist() == [True, False, True]  # only the pair with a dissimilar content
    assert TH.classify(40, OVERLAY_COSINE, 0.1, 300, -40, None) == "semantic"
    assert TH.classify(40, OVERLAY_COSINE, 0.1, 300, -40, 0.3) is None
    # near stays near: the content cosine only gates the semantic rule
    assert TH.classify(2, OVERLAY_COSINE, 0.95, 300, 40, 0.3) == "near"


@pytest.mark.parametrize("pair", [("coffee", "astronaut"), ("rocket", "chelsea")])
def test_unrelated_photos_in_one_window_are_neither_near_nor_semantic(
    photos: dict[str, Image.Image], pair: tuple[str, str]
) -> None:
    test, corpus = window_chrome(photos[pair[0]]), window_chrome(photos[pair[1]])
    match = geometric_match(test, corpus)
    assert needs_content(match), match  # the fit on the chrome, refused as an overlay
    value = content_cosine(test, corpus, match, thumbnail_embed)
    assert value is not None and value < TH.semantic_cosine, value
    assert TH.classify(40, OVERLAY_COSINE, 0.1, 300, match.support) == "semantic"
    assert TH.classify(40, OVERLAY_COSINE, 0.1, 300, match.support, value) is None
    # the overlay brought the hash and verifier close too: still neither near nor semantic
    assert TH.classify(2, OVERLAY_COSINE, 0.95, 300, match.support, value) is None


@pytest.mark.parametrize("name", ["astronaut", "chelsea"])
def test_the_same_scene_in_one_frame_stays_at_least_semantic(
    photos: dict[str, Image.Image], name: str
) -> None:
    test, corpus = patterned_frame(photos[name]), patterned_frame(reshot(photos[name]))
    match = geometric_match(test, corpus)
    value = content_cosine(test, corpus, match, thumbnail_embed)
    assert needs_content(match), match  # the blur leaves the fit on the frame: refused
    assert value is not None and value >= TH.semantic_cosine, value
    verdict = TH.classify(40, OVERLAY_COSINE, 0.1, 300, match.support, value)
    assert verdict in ("near", "semantic"), (verdict, match)


def test_fits_not_refused_get_no_content_cosine(photos: dict[str, Image.Image]) -> None:
    # a copy in the same window: its fit rests on content, the plain rules decide
    test, corpus = window_chrome(photos["coffee"]), window_chrome(photos["coffee"])
    match = geometric_match(test, corpus)
    assert not needs_content(match)
    assert content_cosine(test, corpus, match, thumbnail_embed) is None


def test_the_engine_classifies_with_the_content_cosine(photos: dict[str, Image.Image]) -> None:
    """``verify_pass._content_cosines`` then ``pair.classify_all``: the unrelated photo in the window is
    neither near nor semantic, the same scene in the frame stays semantic, and the evidence
    carries the content cosine."""
    from splitaudit.indexer.match.pair import Pair, classify_all
    from splitaudit.indexer.match.verify_pass import _content_cosines

    cases = {
        1: (window_chrome(photos["coffee"]), window_chrome(photos["astronaut"])),
        2: (patterned_frame(photos["chelsea"]), patterned_frame(reshot(photos["chelsea"]))),
    }
    # the unrelated pair near by hash and by verification too (the overlay brought both
    # close); the re-shot scene near by neither
    hashed = {1: (2, 0.95), 2: (40, 0.1)}
    verdicts = {}
    for item_id, (test, corpus) in cases.items():
        ham, ver = hashed[item_id]
        p = Pair(row=0, item_id=item_id, hamming=ham, cosine=OVERLAY_COSINE, verify=ver)
        p.min_side, p.geometry = 300, geometric_match(test, corpus)
        _content_cosines([p], test, lambda i, c=corpus: c, thumbnail_embed, TH)
        assert p.content_cosine is not None
        assert p.evidence()["content_cosine"] == round(p.content_cosine, 4)
        classify_all([p], TH)
        verdicts[item_id] = p.kind
    assert verdicts[1] is None
    assert verdicts[2] == "semantic"
    # without the content check (no embedder), the overlay-only pair was semantic
    plain = Pair(row=0, item_id=1, hamming=2, cosine=OVERLAY_COSINE, verify=0.95)
    plain.min_side, plain.geometry = 300, geometric_match(*cases[1])
    classify_all([plain], TH)
    assert plain.kind == "semantic"
