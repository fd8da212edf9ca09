"""splitaudit indexer: sources, features, FAISS stores, provenance DB, audit engine and CLI."""

from __future__ import annotations

__version__ = "0.4.0"
