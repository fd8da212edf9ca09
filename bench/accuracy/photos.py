"""Real photographs available offline: scikit-image, Debian darknet, matplotlib, scikit-learn, imagecorruptions."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image

log = logging.getLogger(__name__)

DARKNET_DIR = Path("/usr/share/darknet/data")
MAX_SIDE = 768
DUPLICATE_RADIUS = 12  # pHash bits; unrelated photos sit at ~32

# scikit-image samples bundled in the wheel (the others need a network fetch). ``cat`` is
# ``chelsea`` again, ``horse`` / ``logo`` / ``colorwheel`` are drawings, not photos.
SKIMAGE_PHOTOS = (
    "astronaut",
    "camera",
    "chelsea",
    "coffee",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "grass",
    "gravel",
    "brick",
    "moon",
    "page",
    "text",
    "coins",
    "clock",
    "cell",
)


@dataclass(frozen=True)
class Photo:
    """One real photograph: a unique name, where it came from, and its RGB pixels."""

    name: str
    origin: str
    image: Image.Image


def _to_rgb(array: npt.NDArray[np.generic]) -> Image.Image:
    """Turn a skimage-style array (gray or RGB(A), uint8 or float in [0, 1]) into RGB."""
    arr = np.asarray(array)
    if arr.dtype != np.uint8:
        arr = np.clip(arr * 255.0 if arr.max() <= 1.0 else arr, 0, 255).astype(np.uint8)
    if arr.ndim == 2:
        return Image.fromarray(arr, "L").convert("RGB")
    return Image.fromarray(arr[..., :3], "RGB")


def _shrink(image: Image.Image) -> Image.Image:
    """Cap the longer side at MAX_SIDE (keeps the benchmark fast; edits act on this copy)."""
    image = image.convert("RGB")
    scale = MAX_SIDE / max(image.size)
    if scale < 1.0:
        size = (round(image.width * scale), round(image.height * scale))
        image = image.resize(size, Image.Resampling.LANCZOS)
    return image


def _skimage_photos() -> Iterator[Photo]:
    """scikit-image's bundled sample photos (skips any that would need a download)."""
    try:
        from skimage import data
    except ImportError:
        log.warning("scikit-image is not installed; skipping its sample photos")
        return
    for name in SKIMAGE_PHOTOS:
        loader: Callable[[], npt.NDArray[np.generic]] | None = getattr(data, name, None)
        if loader is None:
            continue
        try:
            yield Photo(f"skimage-{name}", "scikit-image", _to_rgb(loader()))
        except Exception as exc:  # a fetcher without network raises many kinds of errors
            log.info("skimage %s unavailable offline: %s", name, exc)
    try:
        left, _right, _ = data.stereo_motorcycle()
    except Exception as exc:
        log.info("skimage stereo_motorcycle unavailable offline: %s", exc)
    else:
        yield Photo("skimage-motorcycle_left", "scikit-image", _to_rgb(left))


def _darknet_photos() -> Iterator[Photo]:
    """Photos shipped by Debian's ``darknet`` package (``apt-get install darknet``)."""
    if not DARKNET_DIR.is_dir():
        log.warning("%s not found (apt-get install darknet); skipping", DARKNET_DIR)
        return
    for path in sorted(DARKNET_DIR.glob("*.jpg")):
        with Image.open(path) as im:
            yield Photo(f"darknet-{path.stem}", "darknet", im.convert("RGB"))


def _matplotlib_photos() -> Iterator[Photo]:
    """matplotlib's sample photograph of Grace Hopper."""
    try:
        from matplotlib import cbook
    except ImportError:
        return
    path = Path(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    with Image.open(path) as im:
        yield Photo("matplotlib-grace_hopper", "matplotlib", im.convert("RGB"))


def _sklearn_photos() -> Iterator[Photo]:
    """scikit-learn's ``load_sample_images`` (china, flower)."""
    try:
        from sklearn.datasets import load_sample_images
    except ImportError:
        return
    bunch = load_sample_images()
    for array, filename in zip(bunch.images, bunch.filenames, strict=True):
        yield Photo(f"sklearn-{Path(filename).stem}", "scikit-learn", _to_rgb(array))


def _frost_photos() -> Iterator[Photo]:
    """The frost photographs bundled with ``imagecorruptions`` (read as files: the package
    itself does not import without setuptools' ``pkg_resources``)."""
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is None or not spec.submodule_search_locations:
        return
    folder = Path(next(iter(spec.submodule_search_locations))) / "frost"
    for path in sorted(folder.glob("frost*.*")):
        with Image.open(path) as im:
            yield Photo(f"imagecorruptions-{path.stem}", "imagecorruptions", im.convert("RGB"))


def collect_photos() -> list[Photo]:
    """Every offline photo found, longer side capped at MAX_SIDE, sorted by name."""
    photos: dict[str, Photo] = {}
    for source in (
        _skimage_photos,
        _darknet_photos,
        _matplotlib_photos,
        _sklearn_photos,
        _frost_photos,
    ):
        for photo in source():
            photos[photo.name] = Photo(photo.name, photo.origin, _shrink(photo.image))
    return _drop_duplicates([photos[name] for name in sorted(photos)])


def _drop_duplicates(photos: list[Photo]) -> list[Photo]:
    """Drop photos that duplicate an earlier one (imagecorruptions' frost3 is frost2 again):
    a duplicate pair would otherwise be labelled 'unrelated' and count as a false positive."""
    from splitaudit.indexer.features.hashes import hamming
    from splitaudit.indexer.features.perceptual import phash

    kept: list[tuple[Photo, int]] = []
    for photo in photos:
        value = phash(photo.image).value
        twin = next((p for p, v in kept if hamming(v, value) <= DUPLICATE_RADIUS), None)
        if twin is not None:
            log.info("skipping %s: a duplicate of %s", photo.name, twin.name)
            continue
        kept.append((photo, value))
    return [photo for photo, _ in kept]


def lfw_faces() -> npt.NDArray[np.uint8]:
    """scikit-image's ``lfw_subset``: 200 real 25x25 grayscale face / non-face crops (uint8)."""
    try:
        from skimage import data

        faces = data.lfw_subset()
    except Exception as exc:
        log.info("lfw_subset unavailable: %s", exc)
        return np.zeros((0, 25, 25), np.uint8)
    return np.clip(faces * 255.0, 0, 255).astype(np.uint8)
