"""Human-written text embedded in an image file (EXIF text tags, PNG text chunks, comments).

Label-leak checks look for a test item's label in these fields, so they are decoded
properly: ``XP*`` tags are UCS-2 little-endian, ``UserComment`` starts with an 8-byte
charset prefix, and EXIF ASCII tags written as UTF-8 (common in practice) are repaired.
Only metadata the decoder has already parsed is read, so this costs next to nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from PIL import Image

logger = logging.getLogger(__name__)

MAX_FIELD_CHARS = 4096  # a caption, not a payload: bound what one field may contribute

_EXIF_IFD = 0x8769
# IFD0 tags holding free text, by their EXIF names.
_IFD0_TEXT_TAGS: dict[int, str] = {
    0x010D: "DocumentName",
    0x010E: "ImageDescription",
    0x013B: "Artist",
    0x8298: "Copyright",
}
_IFD0_XP_TAGS: dict[int, str] = {
    0x9C9B: "XPTitle",
    0x9C9C: "XPComment",
    0x9C9D: "XPAuthor",
    0x9C9E: "XPKeywords",
    0x9C9F: "XPSubject",
}
_USER_COMMENT = 0x9286
_USER_COMMENT_CHARSETS: dict[bytes, str] = {
    b"ASCII\0\0\0": "ascii",
    b"UNICODE\0": "utf-16",
    b"JIS\0\0\0\0\0": "shift_jis",
    b"\0\0\0\0\0\0\0\0": "undefined",
}


def extract_text_fields(image: Image.Image) -> dict[str, str]:
    """Text fields of a loaded image: EXIF names or PNG chunk keywords -> cleaned values."""
    fields: dict[str, str] = {}
    _add_exif_fields(image, fields)
    if image.format == "PNG":
        _add_png_chunks(image, fields)
    comment = image.info.get("comment")
    if isinstance(comment, bytes | str):
        _put(fields, "Comment", _repair_text(comment))
    return fields


def decode_xp(raw: bytes | Iterable[int] | str) -> str:
    """Decode a Windows ``XP*`` tag (UCS-2 little-endian, NUL-terminated)."""
    if isinstance(raw, str):
        return raw.rstrip("\0")
    data = raw if isinstance(raw, bytes) else bytes(raw)
    if len(data) % 2:
        data = data[:-1]
    return data.decode("utf-16-le", "replace").split("\0", 1)[0]


def decode_user_comment(raw: bytes | str, *, endian: str = "<") -> str:
    """Decode EXIF ``UserComment``: an 8-byte charset prefix, then the text."""
    if isinstance(raw, str):
        return raw.rstrip("\0")
    prefix, body = raw[:8], raw[8:]
    charset = _USER_COMMENT_CHARSETS.get(prefix)
    if charset is None:
        # No valid prefix: some writers store bare text.
        return _repair_text(raw)
    if charset == "utf-16":
        text = _decode_ucs2(body, endian)
    elif charset == "undefined":
        text = _repair_text(body)
    else:
        text = body.decode(charset, "replace")
    return text.split("\0", 1)[0]


def _decode_ucs2(body: bytes, endian: str) -> str:
    """UCS-2 in the EXIF block's byte order, unless the bytes plainly say otherwise."""
    if body[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return body.decode("utf-16", "replace")
    body = body[: len(body) - len(body) % 2]
    # Writers disagree on byte order (the spec says: the TIFF header's). Mostly-Latin text
    # has zero high bytes, which tells little- from big-endian regardless of the header.
    zeros_even, zeros_odd = body[0::2].count(0), body[1::2].count(0)
    if zeros_odd > 2 * zeros_even:
        encoding = "utf-16-le"
    elif zeros_even > 2 * zeros_odd:
        encoding = "utf-16-be"
    else:
        encoding = "utf-16-be" if endian == ">" else "utf-16-le"
    return body.decode(encoding, "replace")


def _add_exif_fields(image: Image.Image, fields: dict[str, str]) -> None:
    try:
        exif = image.getexif()
    except Exception as exc:  # corrupt EXIF must not cost us the image
        logger.debug("unreadable EXIF ignored: %s", exc)
        return
    if not exif:
        return
    for tag, name in _IFD0_TEXT_TAGS.items():
        value = exif.get(tag)
        if isinstance(value, bytes | str):
            _put(fields, name, _repair_text(value))
    for tag, name in _IFD0_XP_TAGS.items():
        value = exif.get(tag)
        if value is not None:
            try:
                _put(fields, name, decode_xp(value))
            except (TypeError, ValueError):
                logger.debug("undecodable %s ignored", name)
    try:
        sub: Mapping[int, Any] = exif.get_ifd(_EXIF_IFD)
    except Exception as exc:
        logger.debug("unreadable EXIF sub-IFD ignored: %s", exc)
        return
    comment = sub.get(_USER_COMMENT)
    if isinstance(comment, bytes | str):
        endian = getattr(exif, "endian", None) or "<"
        _put(fields, "UserComment", decode_user_comment(comment, endian=endian))


def _add_png_chunks(image: Image.Image, fields: dict[str, str]) -> None:
    # For a loaded still PNG ``text`` is already parsed (tEXt / zTXt / iTXt, before and after
    # IDAT). For APNG it would seek to the last frame, so fall back to what ``info`` holds.
    if getattr(image, "is_animated", False):
        chunks = {k: v for k, v in image.info.items() if isinstance(v, str)}
    else:
        chunks = dict(getattr(image, "text", {}))
    for key, value in chunks.items():
        if isinstance(value, str):
            _put(fields, str(key), value)


def _repair_text(value: bytes | str) -> str:
    """Bytes or latin-1-decoded EXIF ASCII -> str, preferring UTF-8 when it decodes cleanly."""
    if isinstance(value, str):
        try:
            raw = value.encode("latin-1")
        except UnicodeEncodeError:
            return value
    else:
        raw = value
    raw = raw.split(b"\0", 1)[0]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _put(fields: dict[str, str], name: str, value: str) -> None:
    cleaned = " ".join(value.replace("\0", " ").split())
    if cleaned and name not in fields:
        fields[name] = cleaned[:MAX_FIELD_CHARS]
