"""splitaudit indexer: sources, features, FAISS stores, provenance DB, audit engine and CLI."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:  # one source of truth: pyproject.toml's version, as installed
    __version__ = version("splitaudit")
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"
