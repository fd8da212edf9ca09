"""The verifier on re-scraped thumbnails (issue 23): shifts up to 12% of the side, zooms
0.75-1.33, and the content it refuses to judge (flat, sparse)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from splitaudit.indexer.match.verify import verifiable, verify_score

VERIFY_SCORE = 0.70  # DEFAULT_THRESHOLDS.verify_score
BIG = 320


def _scene(seed: int) -> Image.Image:
    """A random picture of one kind: blobs and bars over a textured two-tone background."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    image = Image.fromarray(base, "RGB").resize((BIG, BIG), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = (int(v) for v in rng.integers(0, BIG - 60, 2))
        w, h = (int(v) for v in rng.integers(15, 60, 2))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        shape = draw.ellipse if rng.random() < 0.5 else draw.rectangle
        shape((x, y, x + w, y + h), fill=colour)  # type: ignore[arg-type]
    return image.filter(ImageFilter.GaussianBlur(2.0))


def _cut(
    image: Image.Image, size: int, dx: float = 0.0, dy: float = 0.0, zoom: float = 1.0
) -> Image.Image:
    """The central 60% of ``image`` at ``size`` px, moved by (dx, dy) of its side, zoomed in."""
    side = 0.6 * BIG / zoom
    cx, cy = BIG / 2 + dx * 0.6 * BIG, BIG / 2 + dy * 0.6 * BIG
    box = (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)
    return image.resize((size, size), Image.Resampling.LANCZOS, box=box)


@pytest.mark.parametrize("size", [32, 48, 64])
@pytest.mark.parametrize(
    ("dx", "dy", "zoom"),
    [
        (0.12, 0.0, 1.0),
        (-0.12, 0.12, 1.0),  # 12% diagonally: 5.4 px at 32 px (the search reached 3 px before)
        (0.0, 0.0, 0.76),
        (0.0, 0.0, 1.32),
        (0.12, 0.0, 0.76),
        (0.1, -0.1, 1.3),
    ],
)
def test_a_shifted_or_zoomed_thumbnail_verifies(
    size: int, dx: float, dy: float, zoom: float
) -> None:
    scores = []
    for seed in range(3):
        photo = _scene(seed)
        source = _cut(photo, size)
        assert verifiable(source)
        scores.append(verify_score(_cut(photo, size, dx, dy, zoom), source))
    assert min(scores) >= VERIFY_SCORE, scores


def test_different_scenes_of_one_kind_do_not_verify() -> None:
    for a in range(4):
        for b in range(4):
            if a != b:
                shifted = _cut(_scene(10 + a), 32, 0.05, 0.0)
                assert verify_score(shifted, _cut(_scene(10 + b), 32)) < 0.5


def _stars(seed: int, size: int = 32) -> Image.Image:
    """A few bright dots on black: sparse support."""
    rng = np.random.default_rng(seed)
    pixels = np.zeros((size, size), np.uint8)
    for x, y in rng.integers(4, size - 4, (4, 2)):
        pixels[y - 1 : y + 1, x - 1 : x + 1] = 255
    return Image.fromarray(pixels, "L").filter(ImageFilter.GaussianBlur(0.7))


def test_flat_and_sparse_thumbnails_are_not_verifiable_and_do_not_match() -> None:
    flat = Image.new("RGB", (32, 32), (120, 130, 200))
    assert not verifiable(flat)
    assert not verifiable(_stars(0))
    assert verifiable(_cut(_scene(0), 32))
    # Any dot aligns with any other dot: two different star fields must not verify.
    worst = max(verify_score(_stars(a), _stars(b)) for a in range(6) for b in range(6) if a != b)
    assert worst < VERIFY_SCORE
