"""The edits applied to originals: AugLy for full-size photos, region resampling for low-res."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]
HiresTransform = Callable[[Image.Image, np.random.Generator], Image.Image]


def _augly() -> object:
    """Import ``augly.image`` lazily (it is a bench-only dependency and slow to import)."""
    import augly.image as imaugs

    return imaugs


def _crop(fraction: float) -> HiresTransform:
    """Keep ``fraction`` of each side at a random position (AugLy crop)."""

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        x1 = float(rng.uniform(0.0, 1.0 - fraction))
        y1 = float(rng.uniform(0.0, 1.0 - fraction))
        return _augly().crop(image, x1=x1, y1=y1, x2=x1 + fraction, y2=y1 + fraction)  # type: ignore[attr-defined]

    return apply


def _resize(fraction: float) -> HiresTransform:
    """Scale both sides by ``fraction`` (AugLy resize)."""

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        w, h = (max(8, round(side * fraction)) for side in image.size)
        return _augly().resize(image, width=w, height=h)  # type: ignore[attr-defined]

    return apply


def _jpeg(quality: int) -> HiresTransform:
    """Re-encode as JPEG at ``quality`` (AugLy encoding_quality)."""

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        return _augly().encoding_quality(image, quality=quality)  # type: ignore[attr-defined]

    return apply


def _emoji_path(rng: np.random.Generator) -> str:
    """A random twemoji bundled with AugLy."""
    import augly

    emojis = sorted((Path(augly.__file__).parent / "assets" / "twemojis").glob("*/*.png"))
    return str(emojis[int(rng.integers(len(emojis)))])


def _hflip(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _augly().hflip(image)  # type: ignore[attr-defined,no-any-return]


def _rotate(magnitude: float) -> HiresTransform:
    """Rotate by +-``magnitude`` degrees (random sign; AugLy crops to the largest upright rectangle)."""

    def apply(image: Image.Image, rng: np.random.Generator) -> Image.Image:
        degrees = float(rng.choice([-1.0, 1.0]) * magnitude)
        return _augly().rotate(image, degrees=degrees)  # type: ignore[attr-defined,no-any-return]

    return apply


def _colour(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _augly().color_jitter(  # type: ignore[attr-defined,no-any-return]
        image,
        brightness_factor=float(rng.uniform(1.15, 1.35)),
        contrast_factor=float(rng.uniform(1.1, 1.3)),
        saturation_factor=float(rng.uniform(1.3, 1.8)),
    )


def _darken(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _augly().brightness(image, factor=float(rng.uniform(0.5, 0.7)))  # type: ignore[attr-defined,no-any-return]


def _grayscale(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _augly().grayscale(image).convert("RGB")  # type: ignore[attr-defined,no-any-return]


def _text(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    text = [int(c) for c in rng.integers(10, 1000, size=int(rng.integers(6, 12)))]
    return _augly().overlay_text(  # type: ignore[attr-defined,no-any-return]
        image,
        text=text,
        font_size=float(rng.uniform(0.08, 0.14)),
        opacity=float(rng.uniform(0.6, 1.0)),
        color=tuple(int(c) for c in rng.integers(0, 256, size=3)),
        x_pos=float(rng.uniform(0.0, 0.3)),
        y_pos=float(rng.uniform(0.1, 0.8)),
    )


def _emoji(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return (
        _augly()
        .overlay_emoji(  # type: ignore[attr-defined,no-any-return]
            image,
            emoji_path=_emoji_path(rng),
            emoji_size=float(rng.uniform(0.15, 0.3)),
            x_pos=float(rng.uniform(0.0, 0.7)),
            y_pos=float(rng.uniform(0.0, 0.7)),
        )
        .convert("RGB")
    )


def _pad(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    factor = float(rng.uniform(0.08, 0.2))
    colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
    return _augly().pad(image, w_factor=factor, h_factor=factor, color=colour)  # type: ignore[attr-defined,no-any-return]


def _blur(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    return _augly().blur(image, radius=float(rng.uniform(2.0, 4.0)))  # type: ignore[attr-defined,no-any-return]


def _reupload(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """A typical re-post: crop 90%, resize, colour tweak, JPEG 40."""
    image = _crop(0.9)(image, rng)
    image = _resize(0.6)(image, rng)
    image = _colour(image, rng)
    return _jpeg(40)(image, rng)


def _crop_rotate_combo(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """A social-media repost: crop 70%, rotate 10 degrees, JPEG 40, a caption overlaid."""
    image = _crop(0.7)(image, rng)
    image = _rotate(10.0)(image, rng)
    image = _text(image, rng)
    return _jpeg(40)(image, rng)


HIRES_TRANSFORMS: dict[str, HiresTransform] = {
    "resize_50": _resize(0.5),
    "resize_25": _resize(0.25),
    "jpeg_q40": _jpeg(40),
    "jpeg_q20": _jpeg(20),
    "crop_90": _crop(0.9),
    "crop_80": _crop(0.8),
    "crop_70": _crop(0.7),
    "crop_60": _crop(0.6),
    "crop_50": _crop(0.5),
    "hflip": _hflip,
    "rotate_5": _rotate(5.0),
    "rotate_10": _rotate(10.0),
    "rotate_15": _rotate(15.0),
    "colour_jitter": _colour,
    "darken": _darken,
    "grayscale": _grayscale,
    "overlay_text": _text,
    "overlay_emoji": _emoji,
    "pad_border": _pad,
    "blur": _blur,
    "reupload_combo": _reupload,
    "crop70_rot10_combo": _crop_rotate_combo,
}


@dataclass(frozen=True)
class LowresEdit:
    """How a low-res query is re-rendered from its source region."""

    shift: int = 1  # pixels at the query's resolution, max-norm
    zoom: float = 1.0  # >1: the region grows (content shrinks), <1: zoom in
    size_factor: float = 1.0  # query side relative to the original's side
    colour: bool = False
    jpeg75: bool = False
    mirror: bool = False
    crop: float = 1.0  # <1: keep this fraction of the side at a random place (zoom in)


LOWRES_EDITS: dict[str, LowresEdit] = {
    "lr_shift1": LowresEdit(shift=1),
    "lr_shift2": LowresEdit(shift=2),
    "lr_shift3": LowresEdit(shift=3),
    "lr_zoom": LowresEdit(shift=1, zoom=0.0),  # 0 = draw from {0.9, 1.1}
    "lr_colour": LowresEdit(shift=1, colour=True),
    "lr_jpeg75": LowresEdit(shift=1, jpeg75=True),
    "lr_rescale": LowresEdit(shift=1, size_factor=0.0),  # 0 = 32 <-> 64 px
    "lr_mirror": LowresEdit(shift=1, mirror=True),
    "lr_combo": LowresEdit(shift=2, zoom=1.05, colour=True, jpeg75=True),
    "lr_zoom12": LowresEdit(shift=1, zoom=1.2),
    "lr_zoom14": LowresEdit(shift=1, zoom=1.4),
    "lr_crop80": LowresEdit(shift=0, crop=0.8),
    "lr_crop70": LowresEdit(shift=0, crop=0.7),
}


def render_region(photo: Image.Image, box: Box, size: int) -> Image.Image:
    """Resample ``box`` (photo pixels) of ``photo`` to a ``size`` x ``size`` RGB image."""
    return photo.resize((size, size), Image.Resampling.LANCZOS, box=box)


def _shift_box(box: Box, size: int, shift: int, zoom: float, rng: np.random.Generator) -> Box:
    """Move ``box`` by ``shift`` output pixels in a random direction, then scale it by ``zoom``."""
    x0, y0, x1, y1 = box
    px = (x1 - x0) / size  # photo pixels per output pixel
    dx = dy = 0
    while shift:
        dx, dy = (int(v) for v in rng.integers(-shift, shift + 1, size=2))
        if max(abs(dx), abs(dy)) == shift:
            break
    cx, cy = (x0 + x1) / 2 + dx * px, (y0 + y1) / 2 + dy * px
    half = (x1 - x0) * zoom / 2
    return (cx - half, cy - half, cx + half, cy + half)


def _crop_box(box: Box, fraction: float, rng: np.random.Generator) -> Box:
    """A square of ``fraction`` of ``box``'s side at a random place inside it."""
    x0, y0, x1, y1 = box
    side = (x1 - x0) * fraction
    cx = float(rng.uniform(x0, x1 - side))
    cy = float(rng.uniform(y0, y1 - side))
    return (cx, cy, cx + side, cy + side)


def _colour_shift(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """White-balance gains per channel plus AugLy brightness / contrast / saturation jitter."""
    arr = np.asarray(image, dtype=np.float32) * rng.uniform(0.85, 1.15, size=3).astype(np.float32)
    image = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    return _augly().color_jitter(  # type: ignore[attr-defined,no-any-return]
        image,
        brightness_factor=float(rng.uniform(0.85, 1.15)),
        contrast_factor=float(rng.uniform(0.85, 1.15)),
        saturation_factor=float(rng.uniform(0.7, 1.4)),
    )


def apply_lowres_edit(
    photo: Image.Image, box: Box, size: int, edit: LowresEdit, rng: np.random.Generator
) -> Image.Image:
    """Re-render ``box`` of ``photo`` the way a near-duplicate low-res image would differ."""
    zoom = edit.zoom if edit.zoom else float(rng.choice([0.9, 1.1]))
    out_size = size
    if not edit.size_factor:
        out_size = 64 if size <= 32 else 32
    query_box = _shift_box(box, out_size, edit.shift, zoom, rng)
    if edit.crop < 1.0:
        query_box = _crop_box(query_box, edit.crop, rng)
    image = render_region(photo, query_box, out_size)
    if edit.colour:
        image = _colour_shift(image, rng)
    if edit.mirror:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if edit.jpeg75:
        image = _jpeg(75)(image, rng)
    return image.convert("RGB")
