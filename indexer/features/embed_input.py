"""An embedder's input made straight from the decode, without the whole 256-px working copy.

The embedder consumes ``DecodedImage.image`` (the decode's short side Lanczos-fitted to at
most 256 px) through its model's eval geometry: short side resized to ``size`` (torchvision's
arithmetic), then a centre crop. The model looks at the crop only, and an indexing run uses
the working copy for nothing else, so ``ResizeCrop.apply`` computes just that part:

- the Lanczos fit, only over the region the crop (and the model filter's support around it)
  reads: one ``Image.resize`` with a ``box``;
- the model's resize, only over the crop: a second ``Image.resize`` with a ``box``.

Pillow places a box resize's sample points exactly where the whole-image resize puts them
(same scale, same centres, the same clamping at the image's edges), so the pixels are those
of the two whole-image resizes and the crop up to the rounding of the filter coefficients:
a few pixels per image differ by one level (tests pin the bound). About a third less CPU
than the fit, resize and crop, and the input crosses the process boundary at 224 x 224
instead of ~341 x 256.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PIL import Image

from splitaudit.indexer.features.decode import (
    FIT_RESAMPLE,
    MAX_SHORT_SIDE,
    fit_is_one_pass,
    fit_short_side,
    fit_size,
)

# Pillow's filter supports (the radius, in source pixels at scale 1); NEAREST is not a
# filtered resize and is left to the whole-image path.
_SUPPORT = {
    Image.Resampling.BOX: 0.5,
    Image.Resampling.BILINEAR: 1.0,
    Image.Resampling.HAMMING: 1.0,
    Image.Resampling.BICUBIC: 2.0,
    Image.Resampling.LANCZOS: 3.0,
}


@dataclass(frozen=True)
class ResizeCrop:
    """A model's eval geometry: short side to ``size`` with ``resample``, then a centre crop.

    Only crops no larger than ``size`` on either side are accepted (they always fit inside the
    resized image, so no padding is involved).
    """

    size: int
    crop_height: int
    crop_width: int
    resample: int

    def __post_init__(self) -> None:
        if not 0 < self.crop_height <= self.size or not 0 < self.crop_width <= self.size:
            raise ValueError(f"crop {self.crop_height}x{self.crop_width} must fit in {self.size}")
        if self.resample not in _SUPPORT:
            raise ValueError(f"resample {self.resample} is not a filtered Pillow resample")

    def apply(self, decoded: Image.Image) -> Image.Image:
        """The model's crop of ``decoded``'s <=256 px working copy, computed over the crop only."""
        width, height = decoded.size
        fit_w, fit_h = fit_size(width, height, MAX_SHORT_SIDE)
        fitted = (fit_w, fit_h) != (width, height)
        source = decoded
        if fitted and not fit_is_one_pass(width, height, fit_w, fit_h):
            # the fit box-reduces first, on a grid a partial resize would not share: make it whole
            source, width, height, fitted = fit_short_side(decoded), fit_w, fit_h, False
        res_h, res_w = resized_size(fit_h, fit_w, self.size)
        left = round((res_w - self.crop_width) / 2.0)
        top = round((res_h - self.crop_height) / 2.0)
        if (res_w, res_h) == (fit_w, fit_h):  # the model's resize is a no-op: a plain crop
            if not fitted:
                return source.crop((left, top, left + self.crop_width, top + self.crop_height))
            return source.resize(
                (self.crop_width, self.crop_height),
                FIT_RESAMPLE,
                box=_scaled(
                    (left, top, left + self.crop_width, top + self.crop_height),
                    width / fit_w,
                    height / fit_h,
                ),
            )
        scale_x, scale_y = fit_w / res_w, fit_h / res_h
        crop_box = (
            left * scale_x,
            top * scale_y,
            (left + self.crop_width) * scale_x,
            (top + self.crop_height) * scale_y,
        )
        if not fitted:
            return source.resize((self.crop_width, self.crop_height), self.resample, box=crop_box)
        support = _SUPPORT[Image.Resampling(self.resample)]
        margin_x = math.ceil(support * max(scale_x, 1.0)) + 1
        margin_y = math.ceil(support * max(scale_y, 1.0)) + 1
        x0 = max(0, math.floor(crop_box[0]) - margin_x)
        y0 = max(0, math.floor(crop_box[1]) - margin_y)
        x1 = min(fit_w, math.ceil(crop_box[2]) + margin_x)
        y1 = min(fit_h, math.ceil(crop_box[3]) + margin_y)
        part = source.resize(
            (x1 - x0, y1 - y0),
            FIT_RESAMPLE,
            box=_scaled((x0, y0, x1, y1), width / fit_w, height / fit_h),
        )
        return part.resize(
            (self.crop_width, self.crop_height),
            self.resample,
            box=(crop_box[0] - x0, crop_box[1] - y0, crop_box[2] - x0, crop_box[3] - y0),
        )


def resized_size(height: int, width: int, size: int) -> tuple[int, int]:
    """torchvision's ``Resize(size)`` output ``(height, width)``: short side ``size``, long side
    truncated (the same integer arithmetic as ``_compute_resized_output_size``)."""
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(size * long / short)
    return (new_long, size) if width <= height else (size, new_long)


def _scaled(
    box: tuple[int, int, int, int], sx: float, sy: float
) -> tuple[float, float, float, float]:
    return (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
