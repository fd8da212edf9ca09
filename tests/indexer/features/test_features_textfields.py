"""Text fields from EXIF tags, PNG text chunks and JPEG comments."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.features.textfields import (
    decode_user_comment,
    decode_xp,
    extract_text_fields,
)

EXIF_IFD = 0x8769


def _image() -> Image.Image:
    grid = np.add.outer(np.arange(48), np.arange(64)).astype(np.uint8)
    return Image.fromarray(np.stack([grid, grid[::-1], 255 - grid], axis=-1))


def _jpeg_with_exif(exif: Image.Exif) -> bytes:
    buffer = io.BytesIO()
    _image().save(buffer, "JPEG", quality=90, exif=exif)
    return buffer.getvalue()


def test_exif_text_tags_are_extracted() -> None:
    exif = Image.Exif()
    exif[0x010E] = "a golden retriever on grass"  # ImageDescription
    exif[0x013B] = "Jane Doe"  # Artist
    exif[0x8298] = "(c) 2024 ACME"  # Copyright
    exif[0x010D] = "dogs/retriever_001.jpg"  # DocumentName
    exif[0x9C9C] = "training set: dog".encode("utf-16-le") + b"\0\0"  # XPComment
    exif[0x9C9E] = "dog;retriever;pet".encode("utf-16-le") + b"\0\0"  # XPKeywords
    exif[0x9C9B] = "Fido".encode("utf-16-le") + b"\0\0"  # XPTitle
    exif[0x9C9F] = "Hund – ü".encode("utf-16-le") + b"\0\0"  # XPSubject (non-ASCII)
    exif.get_ifd(EXIF_IFD)[0x9286] = b"UNICODE\0" + "label: dog".encode("utf-16-le")
    fields = decode_image(_jpeg_with_exif(exif)).text_fields
    assert fields == {
        "ImageDescription": "a golden retriever on grass",
        "Artist": "Jane Doe",
        "Copyright": "(c) 2024 ACME",
        "DocumentName": "dogs/retriever_001.jpg",
        "XPComment": "training set: dog",
        "XPKeywords": "dog;retriever;pet",
        "XPTitle": "Fido",
        "XPSubject": "Hund – ü",
        "UserComment": "label: dog",
    }


def test_utf8_written_into_ascii_tag_is_repaired() -> None:
    exif = Image.Exif()
    exif[0x010E] = "Café crème, 東京".encode()  # cameras and tools do write UTF-8 here
    fields = decode_image(_jpeg_with_exif(exif)).text_fields
    assert fields["ImageDescription"] == "Café crème, 東京"


def test_png_text_chunks_are_extracted() -> None:
    info = PngImagePlugin.PngInfo()
    info.add_text("Description", "a tabby cat")
    info.add_text("Title", "chat tigré", zip=True)  # zTXt
    info.add_itxt("Keywords", "猫 cat", lang="ja", tkey="キーワード")  # iTXt
    buffer = io.BytesIO()
    _image().save(buffer, "PNG", pnginfo=info)
    fields = decode_image(buffer.getvalue()).text_fields
    assert fields == {"Description": "a tabby cat", "Title": "chat tigré", "Keywords": "猫 cat"}


def test_jpeg_comment_is_extracted() -> None:
    buffer = io.BytesIO()
    _image().save(buffer, "JPEG", comment=b"label=airplane")
    assert decode_image(buffer.getvalue()).text_fields == {"Comment": "label=airplane"}


def test_image_without_metadata_has_no_fields() -> None:
    buffer = io.BytesIO()
    _image().save(buffer, "PNG")
    assert decode_image(buffer.getvalue()).text_fields == {}
    assert extract_text_fields(_image()) == {}


def test_whitespace_is_collapsed_and_empty_values_dropped() -> None:
    exif = Image.Exif()
    exif[0x010E] = "  two\n\nlines  "
    exif[0x013B] = "   "
    fields = decode_image(_jpeg_with_exif(exif)).text_fields
    assert fields == {"ImageDescription": "two lines"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"ASCII\0\0\0hello", "hello"),
        (b"UNICODE\0" + "héllo".encode("utf-16-le"), "héllo"),
        (b"JIS\0\0\0\0\0" + "日本".encode("shift_jis"), "日本"),
        (b"\0" * 8 + b"plain\0\0\0", "plain"),
        (b"no prefix here", "no prefix here"),
        ("already text", "already text"),
    ],
)
def test_user_comment_charsets(raw: bytes | str, expected: str) -> None:
    assert decode_user_comment(raw) == expected


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_user_comment_unicode_byte_order_is_detected(endian: str, encoding: str) -> None:
    raw = b"UNICODE\0" + "dog, cat".encode(encoding)
    assert decode_user_comment(raw, endian=endian) == "dog, cat"


def test_user_comment_non_latin_unicode_follows_the_exif_byte_order() -> None:
    assert decode_user_comment(b"UNICODE\0" + "東京".encode("utf-16-be"), endian=">") == "東京"
    assert decode_user_comment(b"UNICODE\0" + "東京".encode("utf-16-le"), endian="<") == "東京"


def test_xp_fields_accept_bytes_and_int_tuples() -> None:
    encoded = "Hello".encode("utf-16-le") + b"\0\0garbage"
    assert decode_xp(encoded) == "Hello"
    assert decode_xp(tuple(encoded)) == "Hello"
