"""FAISS float index over L2-normalised embeddings (inner product = cosine); ids are item ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from indexer.errors import IndexMismatchError
from indexer.store.atomic import atomic_write_with
from indexer.store.sidecar import Sidecar

METRIC = "inner_product"
INDEX_FILE = "embeddings.faiss"
SIDECAR_FILE = "embeddings.json"


class FloatStore:
    """An ``IndexIDMap2(IndexFlatIP)`` (or a larger type chosen by size) plus its sidecar state."""

    def __init__(self, index: Any, *, model_id: str, dim: int, sidecar: Sidecar | None = None) -> None:
        self.index = index
        self.model_id = model_id
        self.dim = dim
        self.generation = sidecar.generation if sidecar else 0
        self.last_batch_id = sidecar.last_batch_id if sidecar else 0
        self.index_type = sidecar.index_type if sidecar else "Flat"
        self.params: dict[str, Any] = dict(sidecar.params) if sidecar else {}

    @classmethod
    def create(cls, *, model_id: str, dim: int) -> FloatStore:
        """An empty exact (Flat) store."""
        import faiss

        return cls(faiss.IndexIDMap2(faiss.IndexFlatIP(dim)), model_id=model_id, dim=dim)

    @classmethod
    def load(cls, folder: Path, *, model_id: str, dim: int, mmap: bool = False) -> FloatStore:
        """Load from ``folder``; refuses a sidecar for another model/dim/metric."""
        import faiss

        side = Sidecar.load(folder / SIDECAR_FILE)
        side.check(kind="float", model_id=model_id, dim=dim, metric=METRIC, path=folder / SIDECAR_FILE)
        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
        try:
            index = faiss.read_index(str(folder / INDEX_FILE), flags)
        except RuntimeError as exc:
            raise IndexMismatchError(f"cannot read {folder / INDEX_FILE}: {exc}; rebuild the index") from exc
        if index.ntotal != side.count or index.d != dim:
            raise IndexMismatchError(
                f"{folder / INDEX_FILE} holds {index.ntotal} vectors of dim {index.d} but its "
                f"sidecar says {side.count} of dim {side.dim}; rebuild the index"
            )
        store = cls(index, model_id=model_id, dim=dim, sidecar=side)
        if "efSearch" in side.params or "nprobe" in side.params:
            apply_search_params(index, side.params)
        return store

    @property
    def count(self) -> int:
        """Number of vectors held."""
        return int(self.index.ntotal)

    def add(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add vectors (rows must already be L2-normalised) under the given item ids."""
        if len(ids) == 0:
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise IndexMismatchError(f"vectors of shape {vecs.shape} do not fit an index of dim {self.dim}")
        self.index.add_with_ids(vecs, np.ascontiguousarray(ids, dtype=np.int64))

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Top-``k`` cosine scores and item ids per query (id -1 where fewer than k exist)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if len(q) == 0 or self.count == 0:
            return (np.zeros((len(q), k), np.float32), np.full((len(q), k), -1, np.int64))
        scores, ids = self.index.search(q, min(k, self.count))
        if ids.shape[1] < k:
            pad = k - ids.shape[1]
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=0)
            ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
        return scores, ids

    def save(self, folder: Path, *, generation: int, last_batch_id: int) -> None:
        """Atomically write the index, then its sidecar."""
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_with(folder / INDEX_FILE, lambda p: faiss.write_index(self.index, p))
        self.generation, self.last_batch_id = generation, last_batch_id
        Sidecar(
            kind="float", model_id=self.model_id, dim=self.dim, metric=METRIC, count=self.count,
            generation=generation, last_batch_id=last_batch_id, index_type=self.index_type,
            params=self.params,
        ).save(folder / SIDECAR_FILE)


def apply_search_params(index: Any, params: dict[str, Any]) -> None:
    """Set ``nprobe`` / ``efSearch`` recorded at build time on a loaded index."""
    import faiss

    inner = faiss.downcast_index(index.index) if hasattr(index, "index") else index
    if "nprobe" in params and hasattr(inner, "nprobe"):
        inner.nprobe = int(params["nprobe"])
    if "efSearch" in params and hasattr(inner, "hnsw"):
        inner.hnsw.efSearch = int(params["efSearch"])
