"""Thumbnails read from an image's original bytes (file, tar offset or zip member), downscaled.

Shared by the API's thumbnail endpoints and the self-contained HTML report.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from splitaudit.indexer.errors import ImageDecodeError, PathNotAllowedError, SourceMissingError
from splitaudit.indexer.sources.record import LOCATOR_KINDS, Locator
from splitaudit.indexer.sources.roots import locator_root_error

MAX_SOURCE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Thumbnail:
    """An encoded thumbnail."""

    data: bytes
    media_type: str


def thumbnail_etag(sha256: str | None, locator: Mapping[str, Any], size: int) -> str:
    """A strong ETag from the content hash (or, lacking one, the locator) and the size."""
    basis = sha256 or hashlib.sha256(repr(sorted(locator.items())).encode()).hexdigest()
    return f'"{basis}-{size}"'


def _missing(
    what: str, reason: str, sha256: str | None, pixel_digest: str | None
) -> SourceMissingError:
    return SourceMissingError(
        f"original bytes of {what} are not available ({reason}); "
        f"sha256={sha256 or 'unknown'} pixel_digest={pixel_digest or 'unknown'}"
    )


def read_original(
    locator: Mapping[str, Any],
    *,
    what: str,
    sha256: str | None,
    pixel_digest: str | None,
    allowed_roots: Sequence[str] | None = None,
) -> bytes:
    """The item's bytes via its stored locator; ``SourceMissingError`` when gone or changed.

    With ``allowed_roots`` (resolved folders), a locator outside them is refused with
    ``PathNotAllowedError`` before anything is read.
    """
    try:
        loc = Locator.from_dict(locator)
    except TypeError as exc:
        raise _missing(what, f"unusable locator: {exc}", sha256, pixel_digest) from exc
    if allowed_roots is not None and loc.kind != "none":
        reason = locator_root_error(loc, allowed_roots)
        if reason is not None:
            raise PathNotAllowedError(f"{what}: {reason}; the server does not serve it")
    spec = LOCATOR_KINDS.get(loc.kind)
    if spec is not None and not spec.local:
        # The server never fetches remote URLs on behalf of a client.
        where = f"only at {loc.url}" if loc.url else "no stored location"
        raise _missing(what, where, sha256, pixel_digest)
    try:
        data = loc.read_bytes(max_bytes=MAX_SOURCE_BYTES)
    except (OSError, KeyError, zipfile.BadZipFile, AssertionError) as exc:
        raise _missing(what, f"{loc.uri()}: {exc}", sha256, pixel_digest) from exc
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise _missing(what, f"{loc.uri()} changed since it was indexed", sha256, pixel_digest)
    return data


def render_thumbnail(data: bytes, size: int, *, quality: int = 85) -> Thumbnail:
    """Downscale to fit ``size`` x ``size``: PNG when the image has transparency, else JPEG at ``quality``."""
    try:
        image: Image.Image = Image.open(io.BytesIO(data))
        limit = Image.MAX_IMAGE_PIXELS
        if limit is not None and image.width * image.height > limit:
            raise ImageDecodeError(
                f"decompression bomb refused: {image.width}x{image.height} pixels"
            )
        if image.format == "JPEG":
            image.draft("RGB", (size, size))
        image.load()
        image = ImageOps.exif_transpose(image)
        image.thumbnail((size, size), Image.Resampling.LANCZOS)
    except ImageDecodeError:
        raise
    except (
        UnidentifiedImageError,
        OSError,
        ValueError,
        Image.DecompressionBombError,
        SyntaxError,
    ) as exc:
        raise ImageDecodeError(f"cannot decode the image for a thumbnail: {exc}") from exc
    alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    out = io.BytesIO()
    if alpha:
        image.convert("RGBA").save(out, format="PNG", optimize=True)
        return Thumbnail(out.getvalue(), "image/png")
    image.convert("RGB").save(out, format="JPEG", quality=quality)
    return Thumbnail(out.getvalue(), "image/jpeg")
