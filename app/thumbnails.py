"""Thumbnails for the API: the reading and downscaling live in ``indexer.thumbnails``."""

from __future__ import annotations

from indexer.errors import SourceMissingError
from indexer.thumbnails import (
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
