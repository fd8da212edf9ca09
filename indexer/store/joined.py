"""Stores that answer the audit engine's searches from precomputed self-join tables.

Dedup matches every corpus item against its own corpus through the audit engine
(``match.engine.match_corpus``), chunk by chunk. Instead of one bounded search per item, it
joins the whole corpus once (``hamming_join``, ``vector_join``) and hands the engine these
stand-ins: same methods and signatures as ``BinaryStore`` / ``FloatStore``, answers looked up
in the join tables. A query the tables do not hold (another radius, a larger k, a vector not
announced with ``expect``) falls through to the real store, so an answer is never missing.

One deliberate difference: once ``expect`` has said which items a chunk's query rows are,
each row's own item is left out of its answer (dedup drops self pairs anyway; the engine
would otherwise classify, and for small images verify, one pair per item for nothing).
Where that is ambiguous (two rows with identical vectors) the own item stays in.
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
        witness: dict[tuple[int, int], float] | None = None,
    ) -> None:
        super().__init__(base.index)
        self.base = base
        self.index_type = base.index_type
        self.params = dict(base.params)
        self.radius, self.within = radius, within
        self.knn_k, self.nearest = knn_k, nearest
        # cosine of item pairs (a < b) the dedup's second-witness rule asks about
        # (``dedup.pairs.witness_cosines``); empty without embeddings
        self.witness: dict[tuple[int, int], float] = dict(witness or {})
        self.fallbacks = 0  # queries the tables could not answer (for tests and logs)
        self._rows: list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]] = []

    def expect(self, ids: npt.NDArray[np.int64], queries: list[npt.NDArray[np.uint64]]) -> None:
        """Announce a chunk: its items and the hash arrays it will search with (plain,
        mirrored), radius and k nearest alike."""
        ids = np.asarray(ids, np.int64)
        self._rows = [(np.asarray(q, np.uint64), ids) for q in queries]

    def _own(self, q: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64] | None:
        """The item of each query row, if ``q`` is an announced array."""
        for values, ids in self._rows:
            if len(values) == len(q) and np.array_equal(values, q):
                return ids
        return None

    def search_radius(
        self, hashes: npt.NDArray[np.uint64], radius: int, *, max_results: int | None = None
    ) -> SearchResult:
        """As ``BinaryStore.search_radius``; from the join table at the joined radius."""
        q = np.asarray(hashes, dtype=np.uint64)
        rows = self.within.rows(as_keys(q)) if radius == self.radius else np.full(len(q), -1)
        if max_results is not None or (rows < 0).any():
            self.fallbacks += int((rows < 0).sum()) if max_results is None else len(q)
            return self.base.search_radius(q, radius, max_results=max_results)
        own = self._own(q)
        out: SearchResult = []
        for n, r in enumerate(rows.tolist()):
            ids, dists = self.within.get(r)
            if own is not None:
                keep = ids != own[n]
                ids, dists = ids[keep], dists[keep]
            out.append((ids, dists.astype(np.int32, copy=False)))
        return out

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
        own = self._own(q)
        dists = np.full((len(q), k), _NO_HASH, np.int32)
        ids = np.full((len(q), k), -1, np.int64)
        for n, r in enumerate(rows.tolist()):
            found, d = self.nearest.get(r)
            found, d = found[:k], d[:k]
            if own is not None:
                keep = found != own[n]
                found, d = found[keep], d[keep]
            ids[n, : len(found)] = found
            dists[n, : len(found)] = d
        return dists, ids


class StandInFloats(FloatStore):
    """A ``FloatStore`` standing in for ``base`` (same index and settings) whose ``search``
    answers some queries from elsewhere; subclasses fall through to ``self.base`` for the rest."""

    def __init__(self, base: FloatStore) -> None:
        super().__init__(
            base.index,
            model_id=base.model_id,
            dim=base.dim,
            index_type=base.index_type,
            params=base.params,
        )
        self.base = base


class JoinedFloats(StandInFloats):
    """``FloatStore.search`` answered from a vector self-join table keyed by item id.

    Queries are recognised by their bytes: ``expect(ids, vectors)`` announces a chunk's
    rows (the very arrays the engine will search with).
    """

    def __init__(self, base: FloatStore, *, table: Neighbours, k: int, floor: float) -> None:
        super().__init__(base)
        self.table, self.k, self.floor = table, k, floor
        self._ids_by_bytes: dict[bytes, int] = {}
        self._shared: set[bytes] = set()
        self.fallbacks = 0

    def expect(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Announce the query rows of the next searches and the items they belong to."""
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        by_bytes: dict[bytes, int] = {}
        shared: set[bytes] = set()
        for n, i in enumerate(np.asarray(ids).tolist()):
            key = rows[n].tobytes()
            if key in by_bytes:
                shared.add(key)
            by_bytes[key] = int(i)
        self._ids_by_bytes = by_bytes
        self._shared = shared  # vectors of several rows: the own item is not known

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """As ``FloatStore.search`` for the cosines >= the join floor (lower ones: score 0, id -1)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        keys = [row.tobytes() for row in q]
        item = np.array([self._ids_by_bytes.get(key, -1) for key in keys], np.int64)
        rows = self.table.rows(item) if k <= self.k else np.full(len(q), -1)
        rows[item < 0] = -1
        if (rows < 0).any():
            self.fallbacks += int((rows < 0).sum())
            return self.base.search(q, k)
        scores = np.zeros((len(q), k), np.float32)
        ids = np.full((len(q), k), -1, np.int64)
        for n, r in enumerate(rows.tolist()):
            found, s = self.table.get(r)
            found, s = found[:k], s[:k]
            if keys[n] not in self._shared:
                keep = found != item[n]
                found, s = found[keep], s[keep]
            ids[n, : len(found)] = found
            scores[n, : len(found)] = s
        return scores, ids

    def joined_info(self) -> dict[str, Any]:
        """What the join held (for logs)."""
        return {"queries": len(self.table), "pairs": self.table.pairs, "fallbacks": self.fallbacks}
