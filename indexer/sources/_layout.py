"""Naming rules shared by file-based sources: image extensions, hidden names, ImageFolder, JSON-safe values."""

from __future__ import annotations

import base64
import hashlib
import math
import posixpath
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})

# A caption sidecar larger than this is not a caption; we keep only its start.
MAX_CAPTION_BYTES = 64 * 1024

_PLAIN = frozenset({str, int, bool})

# Folders that archive tools add and that never hold dataset images.
JUNK_DIRS = frozenset({"__MACOSX"})


# Image formats splitaudit does not decode. A folder's file in one of them is a record that
# fails with this reason (listed as unreadable), never silently left out.
UNSUPPORTED_IMAGE_EXTENSIONS = frozenset(
    {
        ".svg", ".svgz", ".heic", ".heif", ".avif", ".jxl", ".jp2", ".j2k", ".jpf", ".jpx",
        ".ico", ".icns", ".cur", ".psd", ".xcf", ".tga", ".pcx", ".ppm", ".pgm", ".pbm",
        ".pnm", ".dds", ".exr", ".hdr", ".raw", ".dng", ".cr2", ".cr3", ".nef", ".arw",
        ".orf", ".rw2", ".raf", ".eps",
    }
)  # fmt: skip


def unsupported_image_reason(name: str) -> str | None:
    """Why an image file named ``name`` is not audited (its format), or ``None``."""
    ext = posixpath.splitext(name)[1].lower()
    if ext not in UNSUPPORTED_IMAGE_EXTENSIONS:
        return None
    return (
        f"unsupported image format ({ext}): not audited; convert it to "
        f"{', '.join(sorted(IMAGE_EXTENSIONS))} to include it"
    )


def is_image_name(name: str) -> bool:
    """True when ``name`` ends with one of the image extensions (case-insensitive)."""
    return posixpath.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def is_hidden(rel_posix: str) -> bool:
    """True when any component of the POSIX path starts with a dot or is an archive-tool folder."""
    return any(part.startswith(".") or part in JUNK_DIRS for part in rel_posix.split("/") if part)


def digest(*parts: object) -> str:
    """A short stable fingerprint (hex SHA-256) of ``parts``."""
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def decode_caption(data: bytes) -> str | None:
    """Caption text of a sidecar file: UTF-8 (bad bytes replaced), stripped, ``None`` when empty."""
    text = data[:MAX_CAPTION_BYTES].decode("utf-8", errors="replace").strip()
    return text or None


class LayoutScan:
    """Accumulates image paths and decides whether they form an ImageFolder layout.

    Rule: the layout is ImageFolder when *every* (non-hidden) image lies exactly one
    directory deep (``<class>/<file>``) and the images span at least two class folders.
    One folder alone (``images/*.jpg``) is a container, not a class: labelling every item
    ``images`` would make every path "leak" its label.
    """

    def __init__(self) -> None:
        self.images = 0
        self.off_depth = False
        self._first_class: str | None = None
        self._multi_class = False

    def add(self, rel_posix: str) -> None:
        """Count one image given by its POSIX path relative to the split root."""
        self.images += 1
        parts = rel_posix.split("/")
        if len(parts) != 2:
            self.off_depth = True
            return
        if self._first_class is None:
            self._first_class = parts[0]
        elif parts[0] != self._first_class:
            self._multi_class = True

    @property
    def decided_not(self) -> bool:
        """True once no further image can make the layout ImageFolder."""
        return self.off_depth

    @property
    def is_imagefolder(self) -> bool:
        """Whether the images seen so far form an ImageFolder layout."""
        return self.images > 0 and not self.off_depth and self._multi_class


def imagefolder_label(rel_posix: str) -> str:
    """The class of an ImageFolder image: its parent folder name."""
    return rel_posix.split("/", 1)[0]


def lookup_label(labels: Mapping[str, str], key: str) -> str | None:
    """Label of ``key`` in a ``key,label`` mapping: exact key, else file name, else file stem."""
    if key in labels:
        return labels[key]
    name = posixpath.basename(key)
    if name in labels:
        return labels[name]
    stem = posixpath.splitext(name)[0]
    return labels.get(stem)


def text_value(value: Any) -> str | None:
    """A metadata cell as text: ``None``/NaN/blank -> ``None``, integral floats without ``.0``."""
    if type(value) is str:  # the common case, kept fast for million-row manifests
        return value.strip() or None
    if value is None:
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer():
            return str(int(value))
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = str(value).strip()
    return text or None


def json_safe(value: Any) -> Any:
    """``value`` converted to plain JSON types (NaN -> None, bytes -> text or base64, dates -> ISO)."""
    if value is None or type(value) in _PLAIN:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return json_safe(float(value))
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode("ascii")
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "ndim", None) == 0:
        return json_safe(item())
    tolist = getattr(value, "tolist", None)  # numpy arrays
    if callable(tolist):
        return json_safe(tolist())
    return str(value)
