"""A cached corpus of realistic JPEGs (256-2400 px) cut from photos available offline.

Sources: scikit-image's bundled sample photos, scikit-learn's sample images and, when
Debian's ``darknet`` package is installed, ``/usr/share/darknet/data/*.jpg``. Each output
is a random crop, resized so its long side is 256-2400 px, with mild colour jitter and
sensor-like grain (so file sizes and entropy-decoding cost resemble camera JPEGs, not the
tiny files a smooth upscale would give), saved at a random quality and chroma subsampling,
sometimes progressive. File ``i`` depends only on ``(seed, i)`` and the generator version,
so reruns reuse what is already on disk.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1
DARKNET_DIR = Path("/usr/share/darknet/data")
MIN_SIDE, MAX_SIDE = 256, 2400
# Bundled in the scikit-image wheel (others need a network fetch); drawings and tiny
# images left out.
SKIMAGE_FILES = (
    "astronaut.png", "brick.png", "camera.png", "chelsea.png", "coffee.png", "coins.png",
    "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png", "moon.png",
    "motorcycle_left.png", "motorcycle_right.png", "retina.jpg", "rocket.jpg", "page.png",
)  # fmt: skip


def source_photos() -> list[tuple[str, Image.Image]]:
    """Every offline source photo as ``(name, RGB image)``, sorted by name."""
    found: dict[str, Image.Image] = {}
    try:
        import skimage

        folder = Path(skimage.__file__).parent / "data"
        for name in SKIMAGE_FILES:
            path = folder / name
            if path.is_file():
                with Image.open(path) as im:
                    found[f"skimage-{path.stem}"] = im.convert("RGB")
    except ImportError:
        log.warning("scikit-image is not installed; its sample photos are skipped")
    try:
        from sklearn.datasets import load_sample_images

        bunch = load_sample_images()
        for array, filename in zip(bunch.images, bunch.filenames, strict=True):
            found[f"sklearn-{Path(filename).stem}"] = Image.fromarray(array).convert("RGB")
    except ImportError:
        log.info("scikit-learn is not installed; its sample images are skipped")
    if DARKNET_DIR.is_dir():
        for path in sorted(DARKNET_DIR.glob("*.jpg")):
            with Image.open(path) as im:
                found[f"darknet-{path.stem}"] = im.convert("RGB")
    if not found:
        raise RuntimeError(
            "no source photos found: install scikit-image (pip install scikit-image)"
        )
    return [(name, found[name]) for name in sorted(found)]


def _render(source: Image.Image, rng: np.random.Generator) -> tuple[Image.Image, dict[str, object]]:
    """One random realistic JPEG rendition of ``source`` (pixels + save options)."""
    w, h = source.size
    fw, fh = rng.uniform(0.45, 1.0, 2)
    cw, ch = max(32, int(w * fw)), max(32, int(h * fh))
    x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    crop = source.crop((x0, y0, x0 + cw, y0 + ch))
    if rng.random() < 0.5:
        crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    long_side = int(rng.integers(MIN_SIDE, MAX_SIDE + 1))
    scale = long_side / max(cw, ch)
    size = (max(MIN_SIDE // 2, round(cw * scale)), max(MIN_SIDE // 2, round(ch * scale)))
    resized = crop.resize(size, Image.Resampling.BICUBIC)
    pixels = np.asarray(resized, dtype=np.float32)
    gain = rng.uniform(0.85, 1.15, 3).astype(np.float32)
    offset = np.float32(rng.uniform(-12, 12))
    sigma = np.float32(rng.uniform(2.0, 7.0))
    noise = rng.standard_normal(pixels.shape, dtype=np.float32) * sigma
    out = np.clip(pixels * gain + offset + noise, 0, 255).astype(np.uint8)
    options: dict[str, object] = {
        "quality": int(rng.integers(60, 96)),
        "subsampling": 0 if rng.random() < 0.2 else 2,
        "progressive": bool(rng.random() < 0.15),
    }
    return Image.fromarray(out), options


def photo_path(out_dir: Path, index: int, seed: int) -> Path:
    """Where file ``index`` of the corpus with ``seed`` lives."""
    return out_dir / f"photo-v{GENERATOR_VERSION}-s{seed}-{index:05d}.jpg"


def make_photo_corpus(out_dir: Path | str, n: int = 1000, seed: int = 0) -> list[Path]:
    """Write (or reuse) ``n`` realistic JPEGs under ``out_dir``; returns their paths in order."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [photo_path(folder, i, seed) for i in range(n)]
    missing = [i for i, path in enumerate(paths) if not path.is_file()]
    if not missing:
        return paths
    sources = source_photos()
    log.info("generating %d of %d photos in %s", len(missing), n, folder)
    for i in missing:
        rng = np.random.default_rng([seed, i, GENERATOR_VERSION])
        _, source = sources[int(rng.integers(len(sources)))]
        image, options = _render(source, rng)
        tmp = paths[i].with_suffix(".tmp")
        image.save(tmp, "JPEG", **options)
        os.replace(tmp, paths[i])  # atomic: an interrupted run never leaves a half file
    return paths
