"""A model's eval transform without torch: PIL geometry + numpy normalisation, same numbers.

``BatchPreprocess`` runs a torchvision ``Compose`` (resize, centre crop, convert, to-tensor,
normalise), which needs torch and torchvision imported (~2 s of a run's start). A cached
export (``splitaudit.indexer.embed.backends.launch``) needs neither: ``describe`` turns the transform into
plain data once, when the export is accepted, and ``ArrayPreprocess`` replays it with Pillow
and numpy. Every step is the one torchvision runs on a PIL image (the same output size
arithmetic, the same ``Image.resize`` call, the same crop box and zero padding) and the
normalisation is the same two float32 operations, so the batch is bit for bit
``BatchPreprocess``'s (tested). A transform with any other step is not described (``None``),
and such models always load through torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageOps

from splitaudit.indexer.embed.embedder import is_normalize, is_to_tensor

FORMAT = 1  # bump when the description's meaning changes

Description = dict[str, Any]


def describe(transform: Callable[[Image.Image], Any]) -> Description | None:
    """Plain-data description of a torchvision eval transform, or None if it has another step.

    Handles ``Resize`` (an int or ``(h, w)``, any interpolation, optional ``max_size``),
    ``CenterCrop``, open_clip's RGB conversion, then ``ToTensor`` + ``Normalize``.
    """
    steps = list(getattr(transform, "transforms", []))
    if len(steps) < 2 or not is_to_tensor(steps[-2]) or not is_normalize(steps[-1]):
        return None
    out: Description = {"format": FORMAT, "geometry": []}
    for step in steps[:-2]:
        name = type(step).__name__
        if name == "Resize":
            from torchvision.transforms.functional import pil_modes_mapping

            size = step.size
            size_list = [int(size)] if isinstance(size, int) else [int(s) for s in size]
            if len(size_list) not in (1, 2) or (step.max_size is not None and len(size_list) != 1):
                return None
            out["geometry"].append(
                {
                    "op": "resize",
                    "size": size_list,
                    "max_size": None if step.max_size is None else int(step.max_size),
                    "resample": int(pil_modes_mapping[step.interpolation]),
                }
            )
        elif name == "CenterCrop":
            height, width = (int(v) for v in step.size)
            out["geometry"].append({"op": "center_crop", "size": [height, width]})
        elif (name == "MaybeConvertMode" and getattr(step, "mode", None) == "RGB") or getattr(
            step, "__name__", ""
        ) == "_convert_to_rgb":
            continue  # the batch is converted to RGB before any step
        else:
            return None
    out["mean"] = [float(m) for m in steps[-1].mean]
    out["std"] = [float(s) for s in steps[-1].std]
    if len(out["mean"]) != 3 or len(out["std"]) != 3:
        return None
    return out


class ArrayPreprocess:
    """Replays a ``describe``d transform: PIL images -> float32 ``(n, 3, H, W)`` numpy batch.

    The batch is C-contiguous NCHW, the layout the exported runners feed (``BatchPreprocess``'s
    tensor is channels-last; the values are identical).
    """

    def __init__(self, description: Description) -> None:
        if description.get("format") != FORMAT:
            raise ValueError(f"unknown preprocess description format {description.get('format')}")
        self.description = description
        mean = np.array(description["mean"], dtype=np.float32).reshape(1, 3, 1, 1)
        std = np.array(description["std"], dtype=np.float32).reshape(1, 3, 1, 1)
        # BatchPreprocess's float32 arithmetic: (x / 255 - mean) / std as x * scale + shift
        self._scale = np.float32(1.0) / (np.float32(255.0) * std)
        self._shift = -mean / std

    def __call__(self, images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
        """Preprocess ``images`` (PIL, any mode) into a float32 ``(n, 3, H, W)`` array."""
        arrays = []
        for image in images:
            out = image if image.mode == "RGB" else image.convert("RGB")
            for step in self.description["geometry"]:
                out = _apply(step, out)
            arrays.append(np.asarray(out))
        pixels = np.stack(arrays)  # (n, H, W, 3) uint8
        # One pass from uint8 into a C-contiguous NCHW float32 batch (what the ONNX Runtime and
        # OpenVINO runners feed); the same two float32 operations, so the same values.
        normalised: npt.NDArray[np.float32] = np.empty(
            (pixels.shape[0], pixels.shape[3], pixels.shape[1], pixels.shape[2]), np.float32
        )
        np.multiply(pixels.transpose(0, 3, 1, 2), self._scale, out=normalised)
        normalised += self._shift
        return normalised


def _apply(step: dict[str, Any], image: Image.Image) -> Image.Image:
    if step["op"] == "resize":
        height, width = _resized_size(image.height, image.width, step["size"], step["max_size"])
        if (height, width) == (image.height, image.width):
            return image
        return image.resize((width, height), step["resample"])
    if step["op"] == "center_crop":
        return _center_crop(image, *step["size"])
    raise ValueError(f"unknown preprocess step {step['op']!r}")


def _resized_size(h: int, w: int, size: list[int], max_size: int | None) -> tuple[int, int]:
    """torchvision's ``_compute_resized_output_size`` (same integer arithmetic)."""
    if len(size) == 2:
        return size[0], size[1]
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size[0], int(size[0] * long / short)
    if max_size is not None and new_long > max_size:
        new_short, new_long = int(max_size * new_short / new_long), max_size
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return new_h, new_w


def _center_crop(image: Image.Image, crop_height: int, crop_width: int) -> Image.Image:
    """torchvision's ``center_crop`` on a PIL image (zero padding where the crop is larger)."""
    width, height = image.size
    if crop_width > width or crop_height > height:
        border = (
            (crop_width - width) // 2 if crop_width > width else 0,
            (crop_height - height) // 2 if crop_height > height else 0,
            (crop_width - width + 1) // 2 if crop_width > width else 0,
            (crop_height - height + 1) // 2 if crop_height > height else 0,
        )
        image = ImageOps.expand(image, border=border, fill=(0,) * len(image.getbands()))
        width, height = image.size
        if (crop_width, crop_height) == (width, height):
            return image
    top = round((height - crop_height) / 2.0)
    left = round((width - crop_width) / 2.0)
    return image.crop((left, top, left + crop_width, top + crop_height))
