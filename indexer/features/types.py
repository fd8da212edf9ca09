"""Feature values computed from one decode of one image."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ImageFeatures:
    """Everything the index and the audit need from one image.

    ``phash`` / ``dhash`` / ``phash_mirror`` are 64-bit hashes as unsigned Python ints
    (0 <= h < 2**64). ``pixel_digest`` is the hex SHA-256 of the decoded pixels after EXIF
    orientation (see ``splitaudit.indexer.features.decode`` for the decode scale used), so
    metadata-only edits and lossless re-encodes collide; ``None`` for a JPEG decoded at a
    reduced scale by a hash-only run. ``stream_digest`` (JPEG only) is the SHA-256 of the coded
    image without metadata segments (``splitaudit.indexer.features.jpeg_stream``), independent of decode
    scale. ``text_fields`` holds EXIF / PNG text chunks (name -> value) for label-leak checks.
    """

    sha256: str
    pixel_digest: str | None
    phash: int
    dhash: int
    phash_mirror: int
    width: int
    height: int
    format: str
    stream_digest: str | None = None
    text_fields: dict[str, str] = field(default_factory=dict)
    shape: bytes | None = None  # a thumbnail's shape descriptor (``features.shape``)
