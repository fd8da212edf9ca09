"""Stores that answer the audit engine's searches from precomputed self-join tables.

Dedup matches every corpus item against its own corpus through the audit engine
(``match.engine.match_corpus``), chunk by chunk. Instead of one bounded search per item, it
joins the whole corpus once (``hamming_join``, ``vector_join``) and hands the engine these
stand-ins: same methods and signatures as ``BinaryStore`` / ``FloatStore``, answers looked up
in the join tables. A query the tables do not hold (another radius, a larger k, a vector not
announced with ``expect``) falls through to the real store, so an answer is never missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.binary_index import BinaryStore, SearchResult
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_join import as_keys
from splitaudit.indexer.store.neighbours import Neighbours

_NO_HASH = 65  # farther than any 64-bit distance


class JoinedHashes(BinaryStore):
    """``BinaryStore`` searches answered from Hamming self-join tables."""

    def __init__(
        self,
        base: BinaryStore,
        *,
        radius: int,
        within: Neighbours,
        knn_k: int,
        nearest: Neighbours | None,
    ) -> None:
        super().__init__(base.index)
        self.base = base
        self.index_type = base.index_type
        self.params = dict(base.params)
        self.radius, self.within = radius, within
        self.knn_k, self.nearest = knn_k, nearest
        self.fallbacks = 0  # queries the tables could not answer (for tests and logs)

    def search_radius(
        self, hashes: npt.NDArray[np.uint64], radius: int, *, max_results: int | None = None
    ) -> SearchResult:
        """As ``BinaryStore.search_radius``; from the join table at the joined radius."""
        q = np.asarray(hashes, dtype=np.uint64)
        rows = self.within.rows(as_keys(q)) if radius == self.radius else np.full(len(q), -1)
        if max_results is not None or (rows < 0).any():
            self.fallbacks += int((rows < 0).sum()) if max_results is None else len(q)
            return self.base.search_radius(q, radius, max_results=max_results)
        return [
            (ids, scores.astype(np.int32, copy=False))
            for ids, scores in (self.within.get(int(r)) for r in rows)
        ]

    def search_knn(
        self, hashes: npt.NDArray[np.uint64], k: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """As ``BinaryStore.search_knn``; from the join table (nearest first, padded with -1)."""
        q = np.asarray(hashes, dtype=np.uint64)
        rows = (
            self.nearest.rows(as_keys(q))
            if self.nearest is not None and k <= self.knn_k
            else np.full(len(q), -1)
        )
        if (rows < 0).any():
            self.fallbacks += int((rows < 0).sum())
            return self.base.search_knn(q, k)
        assert self.nearest is not None
        dists = np.full((len(q), k), _NO_HASH, np.int32)
        ids = np.full((len(q), k), -1, np.int64)
        for n, r in enumerate(rows.tolist()):
            found, d = self.nearest.get(r)
            ids[n, : len(found[:k])] = found[:k]
            dists[n, : len(found[:k])] = d[:k]
        return dists, ids


class JoinedFloats(FloatStore):
    """``FloatStore.search`` answered from a vector self-join table keyed by item id.

    Queries are recognised by their bytes: ``expect(ids, vectors)`` announces a chunk's
    rows (the very arrays the engine will search with).
    """

    def __init__(self, base: FloatStore, *, table: Neighbours, k: int, floor: float) -> None:
        super().__init__(
            base.index,
            model_id=base.model_id,
            dim=base.dim,
            index_type=base.index_type,
            params=base.params,
        )
        self.base = base
        self.table, self.k, self.floor = table, k, floor
        self._ids_by_bytes: dict[bytes, int] = {}
        self.fallbacks = 0

    def expect(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Announce the query rows of the next searches and the items they belong to."""
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        self._ids_by_bytes = {
            rows[n].tobytes(): int(i) for n, i in enumerate(np.asarray(ids).tolist())
        }

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """As ``FloatStore.search`` for the cosines >= the join floor (lower ones: score 0, id -1)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        item = np.array([self._ids_by_bytes.get(row.tobytes(), -1) for row in q], np.int64)
        rows = self.table.rows(item) if k <= self.k else np.full(len(q), -1)
        rows[item < 0] = -1
        if (rows < 0).any():
            self.fallbacks += int((rows < 0).sum())
            return self.base.search(q, k)
        scores = np.zeros((len(q), k), np.float32)
        ids = np.full((len(q), k), -1, np.int64)
        for n, r in enumerate(rows.tolist()):
            found, s = self.table.get(r)
            ids[n, : len(found[:k])] = found[:k]
            scores[n, : len(found[:k])] = s[:k]
        return scores, ids

    def joined_info(self) -> dict[str, Any]:
        """What the join held (for logs)."""
        return {"queries": len(self.table), "pairs": self.table.pairs, "fallbacks": self.fallbacks}
