"""Smooth photo tiles and re-encoded copies, as ``bench.dedup_photos`` makes them."""

from __future__ import annotations

import io

from PIL import Image

from splitaudit.indexer.demo import sample_photo


def photo_tile(name: str, x: int, y: int, side: int = 256) -> Image.Image:
    """A 32-px tile of a sample photo at ``(x, y)`` upscaled to ``side`` px: a large image
    with a thumbnail's detail (smooth)."""
    crop = sample_photo(name).crop((x, y, x + 32, y + 32))
    return crop.resize((side, side), Image.Resampling.BICUBIC)


def jpeg_copy(image: Image.Image, quality: int) -> Image.Image:
    """``image`` saved as a JPEG at ``quality`` and decoded again."""
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return Image.open(io.BytesIO(out.getvalue())).convert("RGB")


def letterboxed(image: Image.Image, bar: int) -> Image.Image:
    """The whole picture squeezed between ``bar``-px black bars at the top and bottom."""
    out = Image.new("RGB", image.size, (0, 0, 0))
    out.paste(image.resize((image.width, image.height - 2 * bar)), (0, bar))
    return out
