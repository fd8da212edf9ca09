"""Embedding models behind the ``Embedder`` protocol (OpenCLIP, offline EfficientNet-Lite0)."""
