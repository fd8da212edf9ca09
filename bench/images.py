"""Decoded test images for the benches: random crops of the offline sample photos, and test
images reduced to a given size."""

from __future__ import annotations

import numpy as np
from PIL import Image

from bench.photos import source_photos


def make_images(n: int, min_side: int, max_side: int, seed: int = 0) -> list[Image.Image]:
    """``n`` decoded RGB images cut from the sample photos, long side in ``[min_side, max_side]``."""
    rng = np.random.default_rng(seed)
    sources = [image for _, image in source_photos()]
    images = []
    for i in range(n):
        source = sources[i % len(sources)]
        w, h = source.size
        cw, ch = int(w * rng.uniform(0.5, 1.0)), int(h * rng.uniform(0.5, 1.0))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        crop = source.crop((x, y, x + cw, y + ch))
        long_side = int(rng.integers(min_side, max_side + 1))
        scale = long_side / max(crop.size)
        size = (max(1, round(crop.width * scale)), max(1, round(crop.height * scale)))
        images.append(crop.resize(size, Image.Resampling.BILINEAR).convert("RGB"))
    return images


def at_shorter_side(image: Image.Image, side: int) -> Image.Image:
    """``image`` resized (LANCZOS, aspect kept) so that its shorter side is ``side`` px."""
    scale = side / min(image.size)
    size = (round(image.width * scale), round(image.height * scale))
    return image.resize(size, Image.Resampling.LANCZOS)
