"""A corpus folder with planted duplicate clusters, for the dedup tests."""

from __future__ import annotations

from pathlib import Path

from conftest import photo
from PIL import Image, ImageOps

SIZE = (256, 192)


def bordered(img: Image.Image) -> Image.Image:
    """The image inside a thin black border (4 px: the width the audit's pixel verifier confirms)."""
    return ImageOps.expand(img, border=4, fill=(0, 0, 0))


def plant(root: Path) -> dict[str, set[str]]:
    """Write originals with 1-3 edited copies, singletons and look-alikes; return the true clusters.

    Keys are paths relative to ``root``; the returned map is original key -> its cluster keys.
    """
    root.mkdir(parents=True, exist_ok=True)
    truth: dict[str, set[str]] = {}
    edits = {
        0: {"resized": lambda im: im.resize((128, 96))},
        1: {"jpeg": None, "flip": lambda im: ImageOps.mirror(im)},
        2: {"border": bordered, "resized": lambda im: im.resize((384, 288)), "jpeg": None},
        3: {"flip": lambda im: ImageOps.mirror(im), "border": bordered},
    }
    for seed, copies in edits.items():
        img = photo(seed, SIZE)
        img.save(root / f"orig{seed}.png")
        keys = {f"orig{seed}.png"}
        for name, fn in copies.items():
            key = f"copy{seed}_{name}.jpg"
            (img if fn is None else fn(img)).save(root / key, quality=35 if name == "jpeg" else 90)
            keys.add(key)
        truth[f"orig{seed}.png"] = keys
    for seed in range(100, 106):  # singletons
        photo(seed, SIZE).save(root / f"single{seed}.jpg", quality=90)
    # Look-alikes: the same scene generator at a neighbouring seed, and the same picture's
    # other half (shared palette and layout statistics, different pixels).
    photo(0, (512, 192)).crop((256, 0, 512, 192)).save(root / "lookalike_half.jpg", quality=90)
    ImageOps.grayscale(photo(200, SIZE)).convert("RGB").save(
        root / "lookalike_gray.jpg", quality=90
    )
    return truth
