"""A self-contained demo corpus and test split (procedural photo-like images, planted leaks)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from splitaudit.indexer.errors import UsageError

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


# scikit-image's bundled sample photos (public domain / CC0): label -> loader name.
CORPUS_PHOTOS = {
    "astronaut": "astronaut",
    "coffee": "coffee",
    "cat": "chelsea",
    "rocket": "rocket",
    "motorcycle": "motorcycle",
    "galaxy": "hubble_deep_field",
    "tissue": "immunohistochemistry",
    "retina": "retina",
}
FRESH_PHOTOS = {"photographer": "camera", "coins": "coins", "grass": "grass", "moon": "moon"}


def sample_photo(name: str) -> Image.Image:
    """One of scikit-image's bundled sample photos as RGB (no download)."""
    try:
        from skimage import data
    except ImportError as exc:  # the light core has no scikit-image
        raise UsageError(
            "the demo needs scikit-image's sample photos: pip install 'splitaudit[demo]'"
        ) from exc

    if name == "motorcycle":
        return Image.fromarray(data.stereo_motorcycle()[0]).convert("RGB")
    return Image.fromarray(getattr(data, name)()).convert("RGB")


@dataclass(frozen=True)
class DemoData:
    """Where the demo wrote its corpus and split, and which split keys were planted leaks."""

    corpus: Path
    split: Path
    planted: dict[str, str]


def write_demo(root: Path, *, synthetic: int = 40) -> DemoData:
    """Write ``root/corpus`` (real photos with captions + synthetic distractors) and ``root/split``.

    The split is an ImageFolder: an exact copy, three edited copies (resized JPEG, 90% crop,
    mirror) and fresh photos that are not in the corpus.
    """
    corpus, split = root / "corpus", root / "split"
    photos = {label: sample_photo(name) for label, name in CORPUS_PHOTOS.items()}
    for label, image in photos.items():
        folder = corpus / "photos"
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"{label}.jpg", quality=92)
        (folder / f"{label}.txt").write_text(f"a stock photo of a {label}")
    for i in range(synthetic):
        folder = corpus / "abstract"
        folder.mkdir(parents=True, exist_ok=True)
        synthetic_photo(i, (480, 360)).save(folder / f"{i:04d}.jpg", quality=92)
    planted: dict[str, str] = {}

    def put(label: str, name: str, image: Image.Image, kind: str, **save: object) -> None:
        (split / label).mkdir(parents=True, exist_ok=True)
        image.save(split / label / name, **save)  # type: ignore[arg-type]
        if kind != "clean":
            planted[f"{label}/{name}"] = kind

    (split / "astronaut").mkdir(parents=True, exist_ok=True)
    (split / "astronaut" / "copy.jpg").write_bytes(
        (corpus / "photos" / "astronaut.jpg").read_bytes()
    )
    planted["astronaut/copy.jpg"] = "exact"
    coffee = photos["coffee"]
    put(
        "coffee",
        "resized.jpg",
        coffee.resize((coffee.width // 2, coffee.height // 2)),
        "near",
        quality=35,
    )
    cat = photos["cat"]
    dw, dh = cat.width // 20, cat.height // 20
    put(
        "cat",
        "cropped.jpg",
        cat.crop((dw, dh, cat.width - dw, cat.height - dh)),
        "near",
        quality=80,
    )
    put("rocket", "mirrored.png", ImageOps.mirror(photos["rocket"]), "near")
    for j, (label, name) in enumerate(FRESH_PHOTOS.items()):
        put(label, f"fresh{j}.jpg", sample_photo(name), "clean", quality=90)
    return DemoData(corpus=corpus, split=split, planted=planted)
