"""Thumbnails for the API: the reading and downscaling live in ``splitaudit.indexer.thumbnails``."""

from __future__ import annotations

from splitaudit.indexer.errors import SourceMissingError
from splitaudit.indexer.thumbnails import (
    MAX_SOURCE_BYTES,
    Thumbnail,
    read_original,
    render_thumbnail,
    thumbnail_etag,
)

__all__ = [
    "MAX_SOURCE_BYTES",
    "SourceMissingError",
    "Thumbnail",
    "read_original",
    "render_thumbnail",
    "thumbnail_etag",
]
