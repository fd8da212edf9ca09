"""FAISS binary index over 64-bit perceptual hashes, searched by Hamming distance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from indexer.errors import IndexMismatchError
from indexer.store.atomic import atomic_write_with
from indexer.store.sidecar import Sidecar

METRIC = "hamming"
HASH_MODEL = "phash64"
INDEX_FILE = "phash.faiss"
SIDECAR_FILE = "phash.json"


def hashes_to_bytes(hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    """Unsigned 64-bit hashes -> ``(n, 8)`` big-endian bytes (bit order matches the hex form)."""
    arr = np.ascontiguousarray(np.asarray(hashes, dtype=np.uint64).astype(">u8"))
    return arr.view(np.uint8).reshape(-1, 8)


def signed_to_unsigned(values: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """DB-stored signed int64 hashes -> unsigned uint64 (two's complement)."""
    return np.asarray(values, dtype=np.int64).view(np.uint64)


class BinaryStore:
    """An ``IndexBinaryIDMap2(IndexBinaryFlat(64))`` (or a hash-bucket type beyond a size)."""

    def __init__(self, index: Any, sidecar: Sidecar | None = None) -> None:
        self.index = index
        self.generation = sidecar.generation if sidecar else 0
        self.max_item_id = sidecar.max_item_id if sidecar else 0
        self.index_type = sidecar.index_type if sidecar else "BinaryFlat"
        self.params: dict[str, Any] = dict(sidecar.params) if sidecar else {}

    @classmethod
    def create(cls) -> BinaryStore:
        """An empty exhaustive store."""
        import faiss

        return cls(faiss.IndexBinaryIDMap2(faiss.IndexBinaryFlat(64)))

    @classmethod
    def load(cls, folder: Path) -> BinaryStore:
        """Load from ``folder``; refuses a sidecar of another kind."""
        import faiss

        side = Sidecar.load(folder / SIDECAR_FILE)
        side.check(kind="binary", model_id=HASH_MODEL, dim=64, metric=METRIC, path=folder / SIDECAR_FILE)
        try:
            index = faiss.read_index_binary(str(folder / INDEX_FILE))
        except RuntimeError as exc:
            raise IndexMismatchError(f"cannot read {folder / INDEX_FILE}: {exc}; rebuild the index") from exc
        if index.ntotal != side.count:
            raise IndexMismatchError(
                f"{folder / INDEX_FILE} holds {index.ntotal} hashes but its sidecar says "
                f"{side.count}; rebuild the index"
            )
        return cls(index, side)

    @property
    def count(self) -> int:
        """Number of hashes held."""
        return int(self.index.ntotal)

    def add(self, ids: npt.NDArray[np.int64], hashes: npt.NDArray[np.uint64]) -> None:
        """Add unsigned 64-bit hashes under the given item ids."""
        if len(ids) == 0:
            return
        self.index.add_with_ids(hashes_to_bytes(hashes), np.ascontiguousarray(ids, dtype=np.int64))

    def search_radius(
        self, hashes: npt.NDArray[np.uint64], radius: int
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]]:
        """For each query hash, the item ids within Hamming ``radius`` and their distances."""
        if len(hashes) == 0 or self.count == 0:
            return [(np.empty(0, np.int64), np.empty(0, np.int32)) for _ in range(len(hashes))]
        # FAISS binary range search is exclusive of the radius.
        lims, dists, ids = self.index.range_search(hashes_to_bytes(hashes), radius + 1)
        return [
            (ids[lims[i] : lims[i + 1]].astype(np.int64), dists[lims[i] : lims[i + 1]].astype(np.int32))
            for i in range(len(hashes))
        ]

    def search_knn(
        self, hashes: npt.NDArray[np.uint64], k: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """The ``k`` nearest hashes (distances, ids) per query."""
        if len(hashes) == 0 or self.count == 0:
            return np.zeros((len(hashes), k), np.int32), np.full((len(hashes), k), -1, np.int64)
        dists, ids = self.index.search(hashes_to_bytes(hashes), min(k, self.count))
        return dists.astype(np.int32), ids.astype(np.int64)

    def save(self, folder: Path, *, generation: int, max_item_id: int) -> None:
        """Atomically write the index, then its sidecar."""
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_with(folder / INDEX_FILE, lambda p: faiss.write_index_binary(self.index, p))
        self.generation, self.max_item_id = generation, max_item_id
        Sidecar(
            kind="binary", model_id=HASH_MODEL, dim=64, metric=METRIC, count=self.count,
            generation=generation, max_item_id=max_item_id, index_type=self.index_type,
            params=self.params,
        ).save(folder / SIDECAR_FILE)
