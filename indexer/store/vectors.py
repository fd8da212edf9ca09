"""Vector batch files: the embeddings of one committed indexing batch, with their item ids."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.atomic import atomic_write_bytes

VECTORS_DIR = "vectors"


def batch_path(corpus_dir: Path, name: str) -> Path:
    """Where batch ``name`` of a corpus lives."""
    return corpus_dir / VECTORS_DIR / f"{name}.npz"


def write_batch(path: Path, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.floating]) -> None:
    """Write ids + vectors atomically (fsynced before the DB row is committed).

    float16 vectors (precomputed fp16 embeddings) stay float16 on disk; anything else is float32.
    """
    vecs = np.asarray(vectors)
    if vecs.dtype != np.float16:
        vecs = vecs.astype(np.float32, copy=False)
    buf = io.BytesIO()
    np.savez(buf, ids=np.asarray(ids, np.int64), vectors=vecs)
    atomic_write_bytes(path, buf.getvalue())


def read_batch(path: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Read a batch written by ``write_batch`` (vectors as float32)."""
    with np.load(path) as data:
        return data["ids"], data["vectors"].astype(np.float32, copy=False)


def iter_batches(
    corpus_dir: Path, names: Iterable[str]
) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
    """Stream the named batches in order, one in memory at a time."""
    for name in names:
        yield read_batch(batch_path(corpus_dir, name))
