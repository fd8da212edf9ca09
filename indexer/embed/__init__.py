"""Embedding models behind the ``Embedder`` protocol (OpenCLIP, offline EfficientNet-Lite0)."""

from __future__ import annotations

from splitaudit.indexer.embed.loader import load_embedder
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.embed.spec import DEFAULT_MODEL_SPEC, ModelSpec, parse_model_spec

__all__ = ["DEFAULT_MODEL_SPEC", "Embedder", "ModelSpec", "load_embedder", "parse_model_spec"]
