"""Data sources: folders, manifests, WebDataset shards, archives, precomputed embeddings."""

from __future__ import annotations

from indexer.sources.archive import ArchiveSource, extract_archive
from indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from indexer.sources.folder import FolderSource
from indexer.sources.labels_csv import LabelledSource, load_labels_csv
from indexer.sources.manifest import ManifestSource
from indexer.sources.open import open_source, open_split
from indexer.sources.record import Locator, Record, Shard, Source
from indexer.sources.webdataset import WebDatasetSource

__all__ = [
    "ArchiveSource",
    "FolderSource",
    "LabelledSource",
    "Locator",
    "ManifestSource",
    "PrecomputedEmbeddingSource",
    "Record",
    "Shard",
    "Source",
    "WebDatasetSource",
    "extract_archive",
    "load_labels_csv",
    "open_source",
    "open_split",
]
