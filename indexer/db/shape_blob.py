"""How ``Item.shape`` is stored: a thumbnail's shape descriptor (``features.shape``) as
``SHAPE_DIM`` float16 values, 256 bytes. Here, below the feature and store layers, so the code
that writes the column and the code that reads it share one format."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SHAPE_DIM = 128
DTYPE = np.float16
BLOB_BYTES = SHAPE_DIM * np.dtype(DTYPE).itemsize


def to_bytes(descriptor: npt.NDArray[np.floating]) -> bytes:
    """One descriptor as stored."""
    d = np.asarray(descriptor, dtype=DTYPE)
    if d.shape != (SHAPE_DIM,):
        raise ValueError(f"expected a ({SHAPE_DIM},) descriptor, got shape {d.shape}")
    return d.tobytes()


def from_bytes(blobs: list[bytes]) -> npt.NDArray[np.float32]:
    """Stored descriptors as ``(n, SHAPE_DIM)`` float32 rows (a blob of another length:
    ``ValueError``)."""
    bad = [len(b) for b in blobs if len(b) != BLOB_BYTES]
    if bad:
        raise ValueError(f"a stored shape descriptor has {bad[0]} bytes, expected {BLOB_BYTES}")
    if not blobs:
        return np.zeros((0, SHAPE_DIM), np.float32)
    flat = np.frombuffer(b"".join(blobs), dtype=DTYPE)
    return flat.reshape(len(blobs), SHAPE_DIM).astype(np.float32)
