"""The JPEG stream digest: metadata segments left out, coded data and orientation kept."""

from __future__ import annotations

import io

import pytest
from conftest import photo
from PIL import Image

from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.jpeg_stream import jpeg_stream_digest


def _jpeg(**save: object) -> bytes:
    out = io.BytesIO()
    photo(2, (320, 240)).save(out, "JPEG", quality=85, **save)
    return out.getvalue()


def _with_segment(data: bytes, marker: int, payload: bytes) -> bytes:
    """``data`` with one more segment right after SOI."""
    segment = bytes((0xFF, marker)) + (len(payload) + 2).to_bytes(2, "big") + payload
    return data[:2] + segment + data[2:]


def test_metadata_segments_do_not_change_it() -> None:
    plain = _jpeg()
    exif = Image.Exif()
    exif[0x010E] = "caption"
    digest = jpeg_stream_digest(plain)
    assert digest is not None and len(digest) == 64
    assert jpeg_stream_digest(_jpeg(exif=exif)) == digest
    assert jpeg_stream_digest(_jpeg(comment=b"hello")) == digest
    assert jpeg_stream_digest(_with_segment(plain, 0xE2, b"ICC_PROFILE\x00junk")) == digest
    assert jpeg_stream_digest(_with_segment(plain, 0xED, b"Photoshop 3.0\x00")) == digest
    assert plain != _jpeg(exif=exif)  # the files (and their SHA-256) differ


def test_coded_data_orientation_and_adobe_segment_change_it() -> None:
    plain = _jpeg()
    digest = jpeg_stream_digest(plain)
    out = io.BytesIO()
    photo(2, (320, 240)).save(out, "JPEG", quality=84)  # a re-encode
    assert jpeg_stream_digest(out.getvalue()) != digest
    assert jpeg_stream_digest(plain, orientation=6) != digest
    adobe = _with_segment(plain, 0xEE, b"Adobe\x00\x64\x00\x00\x00\x00\x01")
    assert jpeg_stream_digest(adobe) != digest  # APP14 selects the colour transform
    flipped = bytearray(plain)
    flipped[-10] ^= 0x01  # one bit of the entropy-coded data
    assert jpeg_stream_digest(bytes(flipped)) != digest


def test_progressive_files_are_digested_whole() -> None:
    progressive = _jpeg(progressive=True)
    digest = jpeg_stream_digest(progressive)
    assert digest is not None and digest != jpeg_stream_digest(_jpeg())


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x89PNG\r\n\x1a\n",
        b"\xff\xd8",  # SOI only
        b"\xff\xd8\xff\xd9",  # EOI before any scan
        b"\xff\xd8\xff\xe0\x00",  # length cut off
        b"\xff\xd8\xff\xe0\xff\xff" + b"x" * 10,  # length past the end
        b"\xff\xd8\xff\xe0\x00\x01",  # length below 2
        b"\xff\xd8\x00\x00",  # no marker where one must be
    ],
)
def test_broken_structure_gives_none(data: bytes) -> None:
    assert jpeg_stream_digest(data) is None


def test_features_carry_it_for_jpeg_only() -> None:
    features, _ = extract_features(_jpeg())
    assert features.stream_digest == jpeg_stream_digest(_jpeg())
    png = io.BytesIO()
    photo(2, (64, 48)).save(png, "PNG")
    assert extract_features(png.getvalue())[0].stream_digest is None


def test_hashes_only_decodes_small_and_drops_only_the_reduced_pixel_digest() -> None:
    big = io.BytesIO()
    photo(5, (1024, 768)).save(big, "JPEG", quality=90)
    full, _ = extract_features(big.getvalue())
    small, _ = extract_features(big.getvalue(), hashes_only=True)
    assert small.pixel_digest is None and full.pixel_digest is not None
    assert small.stream_digest == full.stream_digest is not None
    assert (small.width, small.height) == (full.width, full.height) == (1024, 768)
    tiny = io.BytesIO()
    photo(5, (48, 40)).save(tiny, "JPEG", quality=90)
    assert (
        extract_features(tiny.getvalue(), hashes_only=True)[0].pixel_digest
        == extract_features(tiny.getvalue())[0].pixel_digest
    )
    with pytest.raises(ValueError):
        extract_features(big.getvalue(), keep_image=True, hashes_only=True)
