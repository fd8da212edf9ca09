"""Exact-duplicate digests of file bytes."""

from __future__ import annotations

import hashlib


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of the raw file bytes."""
    return hashlib.sha256(data).hexdigest()
