"""Perceptual hashes: pinned values and behaviour under edits (imagehash-style tests)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.hashes import Hash64, hamming
from splitaudit.indexer.features.perceptual import dhash, perceptual_hashes, phash, phash_lowfreq

skimage_data = pytest.importorskip("skimage.data")

# Photos bundled in the scikit-image wheel (no download needed).
PHOTO_NAMES = (
    "astronaut", "coffee", "chelsea", "rocket", "camera", "hubble_deep_field",
    "immunohistochemistry", "retina", "moon", "coins", "brick", "grass",
)  # fmt: skip


def pinned_image() -> Image.Image:
    """A deterministic 128x96 RGB pattern from integer arithmetic only."""
    y, x = np.mgrid[0:96, 0:128].astype(np.int64)
    r = (x * x + 3 * y * y) // 37 % 256
    g = (2 * x + y) % 256
    b = ((x // 16 + y // 12) % 2) * 180 + 30
    # Integer-hash noise (murmur3 finalizer): makes the pins sensitive to the shrink filter.
    v = (y * 128 + x).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    v ^= v >> np.uint64(33)
    v *= np.uint64(0xFF51AFD7ED558CCD)
    v ^= v >> np.uint64(33)
    texture = (v >> np.uint64(57)).astype(np.int64)  # 0..127
    r, g, b = (np.clip(c + texture - 64, 0, 255) for c in (r, g, b))
    return Image.fromarray(np.stack([r, g, b], axis=-1).astype(np.uint8))


def _rgb(array: np.ndarray) -> Image.Image:
    image = Image.fromarray(array).convert("RGB")
    image.thumbnail((512, 512), Image.Resampling.LANCZOS)  # keeps the tests fast
    return image


@pytest.fixture
def photos() -> dict[str, Image.Image]:
    """scikit-image's bundled sample photos as RGB images."""
    return {name: _rgb(getattr(skimage_data, name)()) for name in PHOTO_NAMES}


def _encode(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    if fmt == "PNG":
        options.setdefault("compress_level", 1)  # lossless either way; level 1 is fast
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def _phash_of(data: bytes) -> int:
    features, _ = extract_features(data)
    return features.phash


def test_pinned_hash_values() -> None:
    hashes = perceptual_hashes(pinned_image())
    assert Hash64(hashes.phash).hex() == "9335293af6e48d1a"
    assert Hash64(hashes.dhash).hex() == "fd7afa74bdf8b9f2"
    assert Hash64(hashes.phash_mirror).hex() == "c6607c4fa3b1584f"
    assert phash(pinned_image()).value == hashes.phash
    assert dhash(pinned_image()).value == hashes.dhash


def test_pinned_hashes_through_extract() -> None:
    features, _ = extract_features(_encode(pinned_image()))
    assert Hash64(features.phash).hex() == "9335293af6e48d1a"
    assert (
        features.pixel_digest == "53181db515cbadda01dbde96a62fff88618fadc01826d3d816aab274b8395ecc"
    )


def test_dct_matches_scipy_reference() -> None:
    fft = pytest.importorskip("scipy.fft")
    gray = pinned_image().convert("L")
    pixels = np.asarray(gray.resize((32, 32), Image.Resampling.BOX), float)
    reference = fft.dct(fft.dct(pixels, axis=0), axis=1)[:8, :8]
    assert np.allclose(phash_lowfreq(gray), reference, rtol=0, atol=1e-6)


def test_hash_of_gray_and_rgb_versions_agree(photos: dict[str, Image.Image]) -> None:
    image = photos["astronaut"]
    assert phash(image) - phash(image.convert("L")) == 0


EDITS: dict[str, Callable[[Image.Image], bytes]] = {
    "resize_half": lambda im: _encode(
        im.resize((im.width // 2, im.height // 2), Image.Resampling.BICUBIC)
    ),
    "resize_double": lambda im: _encode(
        im.resize((im.width * 2, im.height * 2), Image.Resampling.BILINEAR)
    ),
    "jpeg_q30": lambda im: _encode(im, "JPEG", quality=30),
    "brighter": lambda im: _encode(ImageEnhance.Brightness(im).enhance(1.1)),
    "contrast": lambda im: _encode(ImageEnhance.Contrast(im).enhance(0.9)),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_small_edits_give_small_distances(photos: dict[str, Image.Image], edit: str) -> None:
    distances = {
        name: hamming(_phash_of(_encode(image)), _phash_of(EDITS[edit](image)))
        for name, image in photos.items()
    }
    assert max(distances.values()) <= 8, distances


def test_unrelated_photos_are_far_apart(photos: dict[str, Image.Image]) -> None:
    hashes = {name: _phash_of(_encode(image)) for name, image in photos.items()}
    distances = {
        (a, b): hamming(hashes[a], hashes[b]) for a, b in itertools.combinations(sorted(hashes), 2)
    }
    closest = min(distances, key=distances.__getitem__)
    assert distances[closest] >= 20, (closest, distances[closest])


def test_mirror_hash_is_hash_of_mirrored_image(photos: dict[str, Image.Image]) -> None:
    for name, image in photos.items():
        hashes = perceptual_hashes(image)
        mirrored = perceptual_hashes(ImageOps.mirror(image))
        assert hashes.phash_mirror == mirrored.phash, name
        assert mirrored.phash_mirror == hashes.phash, name


def test_mirroring_changes_the_plain_hash(photos: dict[str, Image.Image]) -> None:
    # Otherwise the query side would not need to try the mirrored hash at all.
    image = photos["astronaut"]
    assert phash(image) - phash(ImageOps.mirror(image)) >= 20
