"""Vector batch files: the embeddings of one committed indexing batch, with their item ids."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import numpy.typing as npt

from indexer.store.atomic import atomic_write_bytes

VECTORS_DIR = "vectors"


def batch_path(corpus_dir: Path, name: str) -> Path:
    """Where batch ``name`` of a corpus lives."""
    return corpus_dir / VECTORS_DIR / f"{name}.npz"


def write_batch(path: Path, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
    """Write ids + float32 vectors atomically (fsynced before the DB row is committed)."""
    buf = io.BytesIO()
    np.savez(buf, ids=np.asarray(ids, np.int64), vectors=np.asarray(vectors, np.float32))
    atomic_write_bytes(path, buf.getvalue())


def read_batch(path: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Read a batch written by ``write_batch``."""
    with np.load(path) as data:
        return data["ids"], data["vectors"]
