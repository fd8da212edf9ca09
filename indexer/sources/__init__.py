"""Data sources: folders, manifests, WebDataset shards, archives, precomputed embeddings."""

from __future__ import annotations

# Registers the built-in formats (folder, manifest, WebDataset, archives, Hugging Face, ...).
from splitaudit.indexer.sources import builtin_formats as _builtin_formats  # noqa: F401
from splitaudit.indexer.sources._layout import is_hidden, is_image_name
from splitaudit.indexer.sources.archive import ArchiveSource, extract_archive
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.labels_csv import LabelledSource, load_labels_csv
from splitaudit.indexer.sources.manifest import ManifestSource
from splitaudit.indexer.sources.open import open_source, open_split
from splitaudit.indexer.sources.record import Locator, LocatorKindSpec, Record, Shard, Source
from splitaudit.indexer.sources.registry import (
    SourceFormat,
    register_source_format,
    source_formats,
)
from splitaudit.indexer.sources.webdataset import WebDatasetSource

__all__ = [
    "ArchiveSource",
    "FolderSource",
    "LabelledSource",
    "Locator",
    "LocatorKindSpec",
    "ManifestSource",
    "PrecomputedEmbeddingSource",
    "Record",
    "Shard",
    "Source",
    "SourceFormat",
    "WebDatasetSource",
    "extract_archive",
    "is_hidden",
    "is_image_name",
    "load_labels_csv",
    "open_source",
    "open_split",
    "register_source_format",
    "source_formats",
]
