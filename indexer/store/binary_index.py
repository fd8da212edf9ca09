"""FAISS binary index over 64-bit perceptual hashes, searched by Hamming distance.

Hashes live in an exhaustive ``IndexBinaryIDMap2(IndexBinaryFlat(64))`` (8 bytes + an 8-byte
id per item). Beyond a size (``IndexPolicy.hash_flat_max``) a multi-index hash table
(``hamming_mih``, ~24 bytes per item, built in memory on load) answers radius searches up to
``MAX_EXACT_RADIUS`` bits sub-linearly and still exactly; larger radii fall back to FAISS
brute force. The sidecar records the type and the recall measured against brute force.

Verification candidates ("the k nearest within the candidate radius", ``search_knn_within``)
come from the same tables: exact within ``knn_exact_radius`` (params; ``MAX_EXACT_RADIUS`` by
default), so hashes farther than that are not nominated. On a large corpus the exhaustive
k-NN's extra neighbours are the background: among 10M random 64-bit hashes the 10th nearest
of any query lies ~13-15 bits away. The sidecar records the recall of this search against
the exhaustive k-NN within the candidate radius (``knn_recall``), measured at build time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store.atomic import atomic_write_with
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS, MultiIndexHash
from splitaudit.indexer.store.sidecar import Sidecar

log = logging.getLogger(__name__)

METRIC = "hamming"
HASH_MODEL = "phash64"
INDEX_FILE = "phash.faiss"
SIDECAR_FILE = "phash.json"
FLAT_TYPE = "BinaryFlat"
MIH_TYPE = "BinaryFlat+MIH"

SearchResult = list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]]


def hashes_to_bytes(hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    """Unsigned 64-bit hashes -> ``(n, 8)`` big-endian bytes (bit order matches the hex form)."""
    arr = np.ascontiguousarray(np.asarray(hashes, dtype=np.uint64).astype(">u8"))
    return arr.view(np.uint8).reshape(-1, 8)


def bytes_to_hashes(codes: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """Inverse of ``hashes_to_bytes``."""
    return np.ascontiguousarray(codes, dtype=np.uint8).view(">u8").reshape(-1).astype(np.uint64)


def signed_to_unsigned(values: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """DB-stored signed int64 hashes -> unsigned uint64 (two's complement)."""
    return np.asarray(values, dtype=np.int64).view(np.uint64)


class BinaryStore:
    """An ``IndexBinaryIDMap2(IndexBinaryFlat(64))``, plus multi-index hash tables beyond a size."""

    def __init__(self, index: Any, sidecar: Sidecar | None = None) -> None:
        self.index = index
        self.generation = sidecar.generation if sidecar else 0
        self.max_item_id = sidecar.max_item_id if sidecar else 0
        self.index_type = sidecar.index_type if sidecar else FLAT_TYPE
        self.params: dict[str, Any] = dict(sidecar.params) if sidecar else {}
        self.mih: MultiIndexHash | None = None
        if self.index_type == MIH_TYPE and self.count:
            self.mih = MultiIndexHash(*self.codes_and_ids())

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
        side.check(
            kind="binary", model_id=HASH_MODEL, dim=64, metric=METRIC, path=folder / SIDECAR_FILE
        )
        try:
            index = faiss.read_index_binary(str(folder / INDEX_FILE))
        except RuntimeError as exc:
            raise IndexMismatchError(
                f"cannot read {folder / INDEX_FILE}: {exc}; rebuild the index"
            ) from exc
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

    def codes_and_ids(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Copies of every stored hash (unsigned) and its item id, in insertion order."""
        import faiss

        inner: Any = faiss.downcast_IndexBinary(self.index.index)
        codes = bytes_to_hashes(faiss.vector_to_array(inner.xb))
        return codes, faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def add(self, ids: npt.NDArray[np.int64], hashes: npt.NDArray[np.uint64]) -> None:
        """Add unsigned 64-bit hashes under the given item ids (hash tables are rebuilt later)."""
        if len(ids) == 0:
            return
        self.index.add_with_ids(hashes_to_bytes(hashes), np.ascontiguousarray(ids, dtype=np.int64))
        self.mih = None

    def use_mih(self, enabled: bool) -> None:
        """Switch the multi-index hash tables on (built from the stored hashes) or off."""
        if enabled and self.count:
            if self.mih is None or len(self.mih) != self.count:
                self.mih = MultiIndexHash(*self.codes_and_ids())
            self.index_type = MIH_TYPE
        else:
            self.mih, self.index_type = None, FLAT_TYPE

    def search_radius(
        self, hashes: npt.NDArray[np.uint64], radius: int, *, max_results: int | None = None
    ) -> SearchResult:
        """For each query hash, the item ids within Hamming ``radius`` and their distances.

        Exact in every mode. ``max_results`` keeps only the nearest ones per query (bounded
        output for large radii, where a million-item corpus has thousands of hashes per query).
        """
        q = np.asarray(hashes, dtype=np.uint64)
        if len(q) == 0 or self.count == 0:
            return [(np.empty(0, np.int64), np.empty(0, np.int32)) for _ in range(len(q))]
        if self.mih is not None and radius <= MAX_EXACT_RADIUS:
            found = self.mih.search_radius(q, radius)
            return (
                found
                if max_results is None
                else [nearest_hits(i, d, max_results) for i, d in found]
            )
        if max_results is not None:
            dists, ids = self.search_knn(q, max_results)
            return [
                (
                    ids[r][(dists[r] <= radius) & (ids[r] >= 0)],
                    dists[r][(dists[r] <= radius) & (ids[r] >= 0)],
                )
                for r in range(len(q))
            ]
        # FAISS binary range search is exclusive of the radius.
        lims, dists, ids = self.index.range_search(hashes_to_bytes(q), radius + 1)
        return [
            (
                ids[lims[i] : lims[i + 1]].astype(np.int64),
                dists[lims[i] : lims[i + 1]].astype(np.int32),
            )
            for i in range(len(q))
        ]

    @property
    def knn_exact_radius(self) -> int:
        """Radius within which ``search_knn_within`` is exact when the tables are on."""
        return int(self.params.get("knn_exact_radius", MAX_EXACT_RADIUS))

    def search_knn_within(
        self, hashes: npt.NDArray[np.uint64], k: int, radius: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """The ``k`` nearest hashes within ``radius`` per query: ``(distances, ids)`` of shape
        ``(n, k)``, nearest first; id -1 (distance ``radius + 1``) pads.

        With multi-index hash tables (and ``knn_exact_radius <= MAX_EXACT_RADIUS``) the search
        is sub-linear and exact within ``min(radius, knn_exact_radius)`` bits, blind beyond;
        otherwise an exhaustive k-NN (``search_knn``) filtered to ``radius``.
        """
        q = np.asarray(hashes, dtype=np.uint64)
        if self.mih is not None and self.knn_exact_radius <= MAX_EXACT_RADIUS and len(q):
            return self.mih.search_knn_within(q, k, min(radius, self.knn_exact_radius))
        dists, ids = self.search_knn(q, k)
        far = (dists > radius) | (ids < 0)
        return np.where(far, radius + 1, dists).astype(np.int32), np.where(far, -1, ids)

    def search_knn(
        self, hashes: npt.NDArray[np.uint64], k: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """The ``k`` nearest hashes (distances, ids) per query (exhaustive)."""
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
            kind="binary",
            model_id=HASH_MODEL,
            dim=64,
            metric=METRIC,
            count=self.count,
            generation=generation,
            max_item_id=max_item_id,
            index_type=self.index_type,
            params=self.params,
        ).save(folder / SIDECAR_FILE)


def nearest_hits(
    ids: npt.NDArray[np.int64], dists: npt.NDArray[np.int32], n: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """The ``n`` nearest of one query's radius hits (ties in hit order)."""
    if len(ids) <= n:
        return ids, dists
    keep = np.argsort(dists, kind="stable")[:n]
    return ids[keep], dists[keep]
