"""Plain borders a copy gained are cut off before verification (``border_trim``)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.photo_tiles import jpeg_copy, letterboxed
from helpers.photo_tiles import photo_tile as tile
from PIL import Image, ImageOps

from splitaudit.indexer.match import border_trim
from splitaudit.indexer.match.border_trim import border_box, inner_box
from splitaudit.indexer.match.verify import verify_score, verify_thumbnail

NEAR = 0.70  # the verification score that makes a large pair near (efficientnet-lite0)


def score(a: Image.Image, b: Image.Image) -> float:
    """The pair's score asked from both sides, as dedup asks it."""
    return max(verify_score(a, b), verify_score(b, a))


def pillarboxed(image: Image.Image, bar: int) -> Image.Image:
    out = Image.new("RGB", (image.width + 2 * bar, image.height), (128, 128, 128))
    out.paste(image, (bar, 0))
    return out


@pytest.fixture(scope="module")
def smooth() -> Image.Image:
    """An astronaut tile whose copy in a 4-px black frame scored 0.30 before the cut."""
    return tile("astronaut", 128, 128)


def test_a_framed_copy_of_a_smooth_tile_verifies_as_a_copy(smooth: Image.Image) -> None:
    framed = ImageOps.expand(smooth, border=4, fill=(0, 0, 0))
    assert score(framed, smooth) >= 0.95
    assert (
        score(jpeg_copy(ImageOps.expand(smooth, border=12, fill=(255, 255, 255)), 75), smooth)
        >= 0.95
    )
    assert score(jpeg_copy(letterboxed(smooth, 28), 75), smooth) >= 0.9
    assert score(pillarboxed(smooth, 30), smooth) >= 0.9


def test_without_the_cut_the_framed_copy_is_not_near(
    smooth: Image.Image, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the cut is for: the same pair with no border cut off scores under the near cut."""
    monkeypatch.setattr(border_trim, "MAX_SHARE", 0.0)
    assert score(ImageOps.expand(smooth, border=4, fill=(0, 0, 0)), smooth) < NEAR


def test_unrelated_pictures_in_one_frame_do_not_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut along the frame two different tiles compare as themselves: the frame they share no
    longer lifts their score (0.87 with the frame kept)."""

    def framed(image: Image.Image) -> Image.Image:
        return ImageOps.expand(image.resize((216, 216)), border=20, fill=(0, 0, 0))

    a, b = framed(tile("astronaut", 128, 128)), framed(tile("astronaut", 256, 0))
    assert score(a, b) < 0.3
    monkeypatch.setattr(border_trim, "MAX_SHARE", 0.0)
    assert score(a, b) > 0.6


def test_the_box_inside_a_frame_and_bars() -> None:
    rng = np.random.default_rng(0)
    content = rng.integers(0, 256, (64, 64)).astype(np.uint8)
    framed = np.pad(content, ((3, 2), (4, 5)), constant_values=0)
    assert border_box(framed) == (4, 3, 68, 67)
    bars = np.pad(content, ((6, 6), (0, 0)), constant_values=250)
    assert border_box(bars) == (0, 6, 64, 70)
    noisy = bars.astype(np.int16)
    noisy[:6] += rng.integers(-8, 9, (6, 64)).astype(np.int16)  # JPEG noise in a bar
    assert border_box(noisy.clip(0, 255).astype(np.uint8)) == (0, 6, 64, 70)


def test_what_is_not_a_border_is_kept() -> None:
    rng = np.random.default_rng(1)
    content = rng.integers(0, 256, (64, 64)).astype(np.uint8)
    assert border_box(content) is None
    assert border_box(np.full((64, 64), 200, np.uint8)) is None  # plain all over
    sky = content.copy()
    sky[:10] = 255  # a white sky along one edge only
    assert border_box(sky) is None
    two_colours = content.copy()
    two_colours[:4], two_colours[-4:] = 0, 255  # not one frame
    assert border_box(two_colours) is None
    wide = np.pad(content[:20], ((24, 24), (0, 0)), constant_values=0)  # bars of 35% each
    assert border_box(wide) is None


def test_thumbnails_are_never_cut() -> None:
    """An image of at most 64 px on its short side keeps its border: thumbnails are aligned
    on their own pixels."""
    small = ImageOps.expand(tile("astronaut", 128, 128).resize((56, 56)), border=4)
    plain = np.asarray(small.convert("L").resize((32, 32), Image.Resampling.BILINEAR))
    assert np.array_equal(verify_thumbnail(small), plain)
    large = ImageOps.expand(tile("astronaut", 128, 128), border=4)  # 264 px: reduced 4x
    whole = large.convert("L").reduce(4).resize((32, 32), Image.Resampling.BILINEAR)
    cut = (
        large.convert("L")
        .reduce(4)
        .crop((1, 1, 65, 65))
        .resize((32, 32), Image.Resampling.BILINEAR)
    )
    assert np.array_equal(verify_thumbnail(large), np.asarray(cut))
    assert not np.array_equal(verify_thumbnail(large), np.asarray(whole))


@pytest.mark.parametrize("side", [96, 128, 200, 512])
def test_a_copy_at_another_size_gets_the_same_cut(side: int) -> None:
    """The border is looked for at ~64 px whatever the size, so a half-size copy of a
    picture between plain bands is cut where the picture is (a 128-px copy was once left
    whole while its 256-px original was cut, and the pair was lost)."""
    rng = np.random.default_rng(2)
    picture = Image.fromarray(rng.integers(0, 256, (200, 256)).astype(np.uint8))
    banded = Image.new("L", (256, 256), 20)
    banded.paste(picture, (0, 28))
    box = inner_box(np.asarray(banded))
    assert box == (0, 28, 256, 228)
    scaled = inner_box(np.asarray(banded.resize((side, side), Image.Resampling.BILINEAR)))
    assert scaled is not None
    assert np.allclose(np.asarray(scaled) * 256 / side, box, atol=256 / 64 + 256 / side)
