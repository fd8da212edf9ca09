"""A self-contained demo corpus and test split (procedural photo-like images, planted leaks)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

CLASSES = ("harbor", "meadow", "sunset", "market")


def synthetic_photo(seed: int, size: tuple[int, int] = (320, 240)) -> Image.Image:
    """A deterministic photo-like RGB image: smooth gradients, blobs and sensor noise."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        a, b, p = rng.uniform(-1, 1, 3)
        img[..., c] = 128 + 60 * np.sin(a * xx / w * 6 + b * yy / h * 6 + p * 6)
    for _ in range(6):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, min(w, h) / 3)
        color = rng.uniform(0, 255, 3)
        mask = ((xx - cx) ** 2 + (yy - cy) ** 2) < r**2
        img[mask] = 0.35 * img[mask] + 0.65 * color
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


@dataclass(frozen=True)
class DemoData:
    """Where the demo wrote its corpus and split, and which split keys were planted leaks."""

    corpus: Path
    split: Path
    planted: dict[str, str]


def write_demo(root: Path, *, corpus_size: int = 48, clean_split: int = 8) -> DemoData:
    """Write ``root/corpus`` (ImageFolder + captions) and ``root/split`` with planted duplicates."""
    corpus, split = root / "corpus", root / "split"
    for i in range(corpus_size):
        cls = CLASSES[i % len(CLASSES)]
        folder = corpus / cls
        folder.mkdir(parents=True, exist_ok=True)
        synthetic_photo(i, (480, 360)).save(folder / f"{i:04d}.jpg", quality=92)
        (folder / f"{i:04d}.txt").write_text(f"stock photo {i} of a {cls} at dusk")
    planted: dict[str, str] = {}

    def put(cls: str, name: str, image: Image.Image, kind: str, **save: object) -> None:
        (split / cls).mkdir(parents=True, exist_ok=True)
        image.save(split / cls / name, **save)  # type: ignore[arg-type]
        if kind != "clean":
            planted[f"{cls}/{name}"] = kind

    src = corpus / CLASSES[0] / "0000.jpg"
    (split / CLASSES[0]).mkdir(parents=True, exist_ok=True)
    (split / CLASSES[0] / "copy.jpg").write_bytes(src.read_bytes())
    planted[f"{CLASSES[0]}/copy.jpg"] = "exact"
    base = synthetic_photo(5, (480, 360))
    put(CLASSES[1], "resized.jpg", base.resize((240, 180)), "near", quality=35)
    base = synthetic_photo(10, (480, 360))
    put(CLASSES[2], "cropped.jpg", base.crop((24, 18, 456, 342)), "near", quality=80)
    base = synthetic_photo(15, (480, 360))
    put(CLASSES[3], "mirrored.png", ImageOps.mirror(base), "near")
    for j in range(clean_split):
        put(CLASSES[j % len(CLASSES)], f"fresh{j}.jpg", synthetic_photo(10_000 + j, (480, 360)), "clean",
            quality=90)
    return DemoData(corpus=corpus, split=split, planted=planted)
