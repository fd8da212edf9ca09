"""extract_features: every feature from one decode, and the optional working image."""

from __future__ import annotations

import hashlib
import io
import pickle

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.errors import ImageDecodeError
from splitaudit.indexer.features.exact import sha256_bytes
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.perceptual import perceptual_hashes
from splitaudit.indexer.features.types import ImageFeatures


def _jpeg(width: int, height: int) -> bytes:
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // width, y * 255 // height, (x + y) % 256], axis=-1)
    buffer = io.BytesIO()
    exif = Image.Exif()
    exif[0x010E] = "a test photo"
    Image.fromarray(pixels.astype(np.uint8)).save(buffer, "JPEG", quality=90, exif=exif)
    return buffer.getvalue()


def test_sha256_bytes_is_hex_sha256() -> None:
    assert sha256_bytes(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert len(sha256_bytes(b"")) == 64


def test_features_are_filled_from_one_decode() -> None:
    data = _jpeg(1024, 768)
    features, image = extract_features(data)
    assert isinstance(features, ImageFeatures)
    assert image is None
    assert features.sha256 == hashlib.sha256(data).hexdigest()
    assert len(features.pixel_digest) == 64
    assert (features.width, features.height, features.format) == (1024, 768, "JPEG")
    assert features.text_fields == {"ImageDescription": "a test photo"}
    for value in (features.phash, features.dhash, features.phash_mirror):
        assert 0 <= value < 2**64


def test_keep_image_returns_the_working_image() -> None:
    data = _jpeg(1024, 768)
    features, image = extract_features(data, keep_image=True)
    assert image is not None
    assert image.mode == "RGB"
    assert image.size == (341, 256)
    # Keeping the image does not change any feature.
    assert extract_features(data)[0] == features


def test_hashes_match_perceptual_hashes_of_the_decode() -> None:
    data = _jpeg(640, 480)
    features, _ = extract_features(data)
    with Image.open(io.BytesIO(data)) as im:
        im.draft("RGB", (256, 256))
        expected = perceptual_hashes(im.convert("RGB"))
    assert (features.phash, features.dhash, features.phash_mirror) == (
        expected.phash,
        expected.dhash,
        expected.phash_mirror,
    )


def test_features_and_image_pickle_for_worker_processes() -> None:
    features, image = extract_features(_jpeg(300, 200), keep_image=True)
    restored_features, restored_image = pickle.loads(pickle.dumps((features, image)))
    assert restored_features == features
    assert np.array_equal(np.asarray(restored_image), np.asarray(image))


def test_bad_bytes_raise_decode_error() -> None:
    with pytest.raises(ImageDecodeError, match="not an image"):
        extract_features(b"%PDF-1.7 not really")
