"""Shared overlays and insets for the accuracy benchmark (issues 22 and 23).

Every overlay is drawn here, from PIL's default font and patterns generated in code, and is
*the same pixels* on every photo it is put on (photos are first brought to one canvas size):
what web corpora are full of, stock photos under one watermark, shop photos with one logo,
memes in one caption template, photos in one frame, screenshots in one window.

- ``tiled_text``: a semi-transparent text watermark tiled over the whole photo, a footer bar;
- ``centred_text``: one large semi-transparent text watermark in the middle;
- ``corner_logo``: an opaque logo (shapes + text) in the bottom-right corner;
- ``caption_bands``: white bands above and below the photo with the same black text;
- ``frame``: a patterned frame around the photo;
- ``screen_chrome``: a window (title bar, tool bar, side panel, status bar) around the photo.

``inset`` puts a photo inside a screenshot-like canvas at a fraction of its width (a copy
shown inside a larger image: issue 23).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

PHOTO_SIZE = (480, 360)  # every photo is brought to this size before an overlay is drawn
OverlayFn = Callable[[Image.Image], Image.Image]


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def fit_photo(image: Image.Image) -> Image.Image:
    """``image`` centre-cropped to the canvas aspect and brought to ``PHOTO_SIZE`` (no
    distortion): the photo every overlay is drawn on, and its plain copy."""
    image = image.convert("RGB")
    w, h = image.size
    target = PHOTO_SIZE[0] / PHOTO_SIZE[1]
    if w / h > target:
        cw, ch = h * target, float(h)
    else:
        cw, ch = float(w), w / target
    box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
    return image.resize(PHOTO_SIZE, Image.Resampling.LANCZOS, box=box)


_photo = fit_photo


@cache
def _tiled_layer() -> Image.Image:
    """RGBA layer of the tiled text watermark (rotated rows of text) plus a footer bar."""
    w, h = PHOTO_SIZE
    big = Image.new("RGBA", (2 * w, 2 * h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(big)
    font = _font(26)
    for row, y in enumerate(range(0, 2 * h, 64)):
        offset = (row % 2) * 90
        for x in range(-offset, 2 * w, 250):
            draw.text((x, y), "SPLITSTOCK", font=font, fill=(255, 255, 255, 150))
    layer = big.rotate(25, resample=Image.Resampling.BICUBIC).crop(
        (w // 2, h // 2, w // 2 + w, h // 2 + h)
    )
    draw = ImageDraw.Draw(layer)
    draw.rectangle((0, h - 30, w, h), fill=(20, 20, 20, 190))
    draw.text(
        (10, h - 26),
        "splitstock.example  #48213  preview only",
        font=_font(18),
        fill=(255, 255, 255, 230),
    )
    return layer


@cache
def _centred_layer() -> Image.Image:
    w, h = PHOTO_SIZE
    layer = Image.new("RGBA", PHOTO_SIZE, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    font = _font(64)
    text = "PROOF"
    x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
    draw.text(
        ((w - (x1 - x0)) / 2, (h - (y1 - y0)) / 2 - y0), text, font=font, fill=(255, 255, 255, 140)
    )
    draw.ellipse(
        (w / 2 - 150, h / 2 - 70, w / 2 + 150, h / 2 + 70), outline=(255, 255, 255, 140), width=5
    )
    return layer


@cache
def _logo() -> Image.Image:
    side = 96
    logo = Image.new("RGB", (side, side), (200, 30, 40))
    draw = ImageDraw.Draw(logo)
    draw.ellipse((8, 8, 60, 60), fill=(255, 210, 0))
    draw.polygon([(40, 30), (90, 20), (70, 80)], fill=(20, 60, 160))
    draw.rectangle((4, 66, 92, 92), fill=(255, 255, 255))
    draw.text((10, 68), "ACME", font=_font(20), fill=(0, 0, 0))
    return logo


@cache
def _frame_tile() -> np.ndarray:
    """A 24 px ornament tile for the frame (diamonds and dots)."""
    tile = Image.new("RGB", (24, 24), (120, 80, 30))
    draw = ImageDraw.Draw(tile)
    draw.polygon([(12, 1), (23, 12), (12, 23), (1, 12)], fill=(230, 190, 90))
    draw.ellipse((9, 9, 15, 15), fill=(60, 20, 10))
    draw.line((0, 0, 24, 0), fill=(250, 240, 200), width=2)
    return np.asarray(tile)


def tiled_text(image: Image.Image) -> Image.Image:
    """The tiled semi-transparent text watermark and footer bar."""
    return Image.alpha_composite(_photo(image).convert("RGBA"), _tiled_layer()).convert("RGB")


def centred_text(image: Image.Image) -> Image.Image:
    """One large semi-transparent watermark in the middle."""
    return Image.alpha_composite(_photo(image).convert("RGBA"), _centred_layer()).convert("RGB")


def corner_logo(image: Image.Image) -> Image.Image:
    """An opaque logo in the bottom-right corner."""
    out = _photo(image)
    logo = _logo()
    out.paste(logo, (out.width - logo.width - 12, out.height - logo.height - 12))
    return out


def caption_bands(image: Image.Image) -> Image.Image:
    """White bands above and below with the same caption (a meme template)."""
    w, h = PHOTO_SIZE
    band = 70
    out = Image.new("RGB", (w, h + 2 * band), (255, 255, 255))
    out.paste(_photo(image), (0, band))
    draw = ImageDraw.Draw(out)
    font = _font(34)
    for text, y in (("WHEN THE SPLIT LEAKS", 16), ("AND NOBODY CHECKED", h + band + 16)):
        x0, _, x1, _ = draw.textbbox((0, 0), text, font=font)
        draw.text(((w - (x1 - x0)) / 2, y), text, font=font, fill=(0, 0, 0))
    return out


def frame(image: Image.Image) -> Image.Image:
    """A patterned frame (ornament tiles, inner line) around the photo."""
    w, h = PHOTO_SIZE
    border = 48
    tile = _frame_tile()
    reps = ((h + 2 * border) // 24 + 1, (w + 2 * border) // 24 + 1, 1)
    pattern = np.tile(tile, reps)[: h + 2 * border, : w + 2 * border]
    out = Image.fromarray(np.ascontiguousarray(pattern), "RGB")
    draw = ImageDraw.Draw(out)
    draw.rectangle((border - 8, border - 8, w + border + 7, h + border + 7), fill=(250, 240, 200))
    out.paste(_photo(image), (border, border))
    return out


@cache
def _window(content: tuple[int, int]) -> tuple[Image.Image, tuple[int, int]]:
    """A window (title bar, tool bar, side panel, status bar) with room for ``content``;
    returns the window and where the content goes."""
    cw, ch = content
    side, title, tools, status = 150, 34, 30, 24
    w, h = cw + side + 16, ch + title + tools + status + 16
    out = Image.new("RGB", (w, h), (236, 236, 240))
    draw = ImageDraw.Draw(out)
    draw.rectangle((0, 0, w, title), fill=(48, 52, 64))
    for k, colour in enumerate(((255, 95, 86), (255, 189, 46), (39, 201, 63))):
        draw.ellipse((10 + 22 * k, 10, 24 + 22 * k, 24), fill=colour)
    draw.text((90, 8), "Photo Viewer - holiday_album.jpg", font=_font(16), fill=(230, 230, 230))
    draw.rectangle((0, title, w, title + tools), fill=(214, 216, 222))
    for k, label in enumerate(("File", "Edit", "View", "Image", "Help")):
        draw.text((10 + 64 * k, title + 6), label, font=_font(15), fill=(20, 20, 20))
    draw.rectangle((0, title + tools, side, h - status), fill=(246, 246, 248))
    for k in range(8):
        y = title + tools + 12 + 34 * k
        draw.rectangle((10, y, 34, y + 24), fill=(90 + 15 * k, 120, 200 - 12 * k))
        draw.text((42, y + 4), f"album {k + 1}", font=_font(14), fill=(40, 40, 40))
    draw.rectangle((0, h - status, w, h), fill=(48, 52, 64))
    draw.text(
        (10, h - status + 4), "100%  |  4032 x 3024  |  sRGB", font=_font(14), fill=(220, 220, 220)
    )
    return out, (side + 8, title + tools + 8)


def screen_chrome(image: Image.Image) -> Image.Image:
    """The photo inside a window's chrome."""
    photo = _photo(image)
    window, (x, y) = _window(photo.size)
    out = window.copy()
    out.paste(photo, (x, y))
    return out


OVERLAYS: dict[str, OverlayFn] = {
    "tiled_text": tiled_text,
    "centred_text": centred_text,
    "corner_logo": corner_logo,
    "caption_bands": caption_bands,
    "frame": frame,
    "screen_chrome": screen_chrome,
}

CANVAS_SIZE = (1280, 800)


@cache
def _canvas() -> Image.Image:
    """A screenshot-like canvas: a browser-ish page with a header, text lines and a sidebar."""
    w, h = CANVAS_SIZE
    out = Image.new("RGB", CANVAS_SIZE, (250, 250, 252))
    draw = ImageDraw.Draw(out)
    draw.rectangle((0, 0, w, 40), fill=(60, 64, 72))
    draw.rounded_rectangle((120, 8, 900, 32), radius=10, fill=(235, 235, 238))
    draw.text(
        (136, 12),
        "https://news.example/gallery/2024/item?id=8812",
        font=_font(16),
        fill=(30, 30, 30),
    )
    draw.rectangle((0, 40, w, 90), fill=(30, 90, 170))
    draw.text((24, 52), "The Daily Example", font=_font(28), fill=(255, 255, 255))
    rng = np.random.default_rng(7)
    for k in range(24):
        y = 110 + 28 * k
        if y > h - 20:
            break
        length = int(rng.integers(200, 560))
        draw.rectangle((w - 600, y, w - 600 + length, y + 10), fill=(190, 190, 196))
    return out


def inset(image: Image.Image, fraction: float, rng: np.random.Generator) -> Image.Image:
    """``image`` shown inside the screenshot-like canvas at ``fraction`` of its side (fitted
    inside ``fraction`` of the canvas width and height, aspect kept), at a random place."""
    canvas = _canvas().copy()
    w, h = canvas.size
    photo = image.convert("RGB")
    scale = min(fraction * w / photo.width, fraction * h / photo.height)
    size = (max(8, round(photo.width * scale)), max(8, round(photo.height * scale)))
    photo = photo.resize(size, Image.Resampling.LANCZOS)
    x = int(rng.integers(0, max(1, w - size[0])))
    y = int(rng.integers(0, max(1, h - size[1])))
    canvas.paste(photo, (x, y))
    return canvas
