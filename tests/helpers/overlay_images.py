"""Shared overlays drawn in the tests: a tiled text watermark, a patterned frame, an inset canvas.

Each overlay is the same pixels on every photo it is put on (photos are brought to one size
first), the way one stock watermark or one decorative frame is shared by thousands of images.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

SIZE = (400, 300)


def fitted(photo: Image.Image) -> Image.Image:
    """``photo`` centre-cropped to 4:3 and resized to ``SIZE``."""
    w, h = photo.size
    ch = min(h, round(w * 3 / 4))
    cw = round(ch * 4 / 3)
    box = ((w - cw) // 2, (h - ch) // 2, (w + cw) // 2, (h + ch) // 2)
    return photo.convert("RGB").resize(SIZE, Image.Resampling.LANCZOS, box=box)


def tiled_watermark(photo: Image.Image) -> Image.Image:
    """A semi-transparent text watermark tiled over the photo, with a footer bar."""
    w, h = SIZE
    layer = Image.new("RGBA", (2 * w, 2 * h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    font = ImageFont.load_default(size=22)
    for row, y in enumerate(range(0, 2 * h, 52)):
        for x in range(-(row % 2) * 70, 2 * w, 200):
            draw.text((x, y), "TESTSTOCK", font=font, fill=(255, 255, 255, 120))
    layer = layer.rotate(30, resample=Image.Resampling.BICUBIC).crop(
        (w // 2, h // 2, w // 2 + w, h // 2 + h)
    )
    ImageDraw.Draw(layer).rectangle((0, h - 24, w, h), fill=(10, 10, 10, 200))
    ImageDraw.Draw(layer).text(
        (8, h - 21), "teststock.example preview", font=ImageFont.load_default(size=15)
    )
    return Image.alpha_composite(fitted(photo).convert("RGBA"), layer).convert("RGB")


def patterned_frame(photo: Image.Image) -> Image.Image:
    """The photo inside a 40 px frame of a repeated ornament."""
    w, h = SIZE
    border = 40
    tile = Image.new("RGB", (20, 20), (90, 50, 120))
    draw = ImageDraw.Draw(tile)
    draw.ellipse((2, 2, 18, 18), outline=(240, 220, 120), width=2)
    draw.rectangle((8, 8, 12, 12), fill=(250, 250, 250))
    pattern = np.tile(np.asarray(tile), ((h + 2 * border) // 20 + 1, (w + 2 * border) // 20 + 1, 1))
    out = Image.fromarray(np.ascontiguousarray(pattern[: h + 2 * border, : w + 2 * border]))
    out.paste(fitted(photo), (border, border))
    return out


CANVAS = (1000, 700)


def inset(
    photo: Image.Image, fraction: float, at: tuple[int, int]
) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """``photo`` inside a screenshot-like canvas, ``fraction`` of the canvas width wide, its
    top-left corner at ``at``; returns the canvas and the pasted box (fractions of the canvas)."""
    w, h = CANVAS
    canvas = Image.new("RGB", CANVAS, (248, 248, 250))
    draw = ImageDraw.Draw(canvas)
    draw.rectangle((0, 0, w, 36), fill=(50, 54, 64))
    draw.text(
        (14, 8),
        "Slides - quarterly review",
        font=ImageFont.load_default(size=18),
        fill=(230, 230, 230),
    )
    for k in range(14):
        draw.rectangle(
            (40, 80 + 40 * k, 40 + 120 + 17 * (k % 5), 92 + 40 * k), fill=(180, 180, 188)
        )
    width = round(fraction * w)
    height = round(width * photo.height / photo.width)
    canvas.paste(photo.convert("RGB").resize((width, height), Image.Resampling.LANCZOS), at)
    x, y = at
    return canvas, (x / w, y / h, (x + width) / w, (y + height) / h)
