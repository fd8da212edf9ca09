"""How a re-scraped thumbnail differs from its source, for the thumbnail tests."""

from __future__ import annotations

import io

from PIL import Image, ImageEnhance


def square_cut(
    image: Image.Image, cx: float, cy: float, side: float, size: int = 32
) -> Image.Image:
    """The ``side``-px square of ``image`` centred on (cx, cy), resampled to ``size`` px."""
    box = (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)
    return image.resize((size, size), Image.Resampling.LANCZOS, box=box)


def rescraped(image: Image.Image) -> Image.Image:
    """Lower contrast, then JPEG at quality 60: how a re-scraped thumbnail differs."""
    buf = io.BytesIO()
    ImageEnhance.Contrast(image).enhance(0.85).save(buf, format="JPEG", quality=60)
    buf.seek(0)
    return Image.open(buf).convert("RGB")


def grid_tile(photo: Image.Image, col: int, row: int, size: int, dx: float = 0.0) -> Image.Image:
    """A tile of the photo's 3x3 grid (its central square cut to 80%, as bench.recall cuts
    them), moved right by ``dx`` of the tile's side, resampled to ``size`` px."""
    side = 0.8 * min(photo.size)
    step = side / 3
    x0, y0 = (photo.width - side) / 2, (photo.height - side) / 2
    cx, cy = x0 + (col + 0.5 + dx) * step, y0 + (row + 0.5) * step
    return square_cut(photo, cx, cy, step, size)
