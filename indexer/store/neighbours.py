"""Neighbour lists of a self-join, one flat (CSR) table keyed by query: bounded memory at millions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Neighbours:
    """For each query key (sorted, unique), its neighbour ids and scores, best first.

    ``keys`` are whatever the join was keyed by (item ids for vectors, hash values for
    hashes, both as int64); query ``keys[i]``'s neighbours are ``ids[offsets[i]:offsets[i+1]]``.
    Scores are cosines (float32, descending) or Hamming distances (int32, ascending).
    """

    keys: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    ids: npt.NDArray[np.int64]
    scores: npt.NDArray[np.generic]

    @classmethod
    def from_pairs(
        cls,
        keys: npt.NDArray[np.int64],
        query: npt.NDArray[np.int64],
        ids: npt.NDArray[np.int64],
        scores: npt.NDArray[np.generic],
        *,
        k: int | None,
        descending: bool,
    ) -> Neighbours:
        """Group (query key, id, score) triples by query key, best ``k`` each (ties: lower id).

        ``keys``: every query key asked for (a key without a pair gets an empty list).
        """
        keys = np.unique(np.asarray(keys, np.int64))
        rank = -scores.astype(np.float64) if descending else scores.astype(np.float64)
        order = np.lexsort((ids, rank, query))
        query, ids, scores = query[order], ids[order], scores[order]
        if k is not None and len(query):
            starts = np.flatnonzero(np.r_[True, query[1:] != query[:-1]])
            first = np.repeat(starts, np.diff(np.r_[starts, len(query)]))
            keep = np.arange(len(query)) - first < k
            query, ids, scores = query[keep], ids[keep], scores[keep]
        pos = np.searchsorted(keys, query)
        if len(pos) and (pos.max() >= len(keys) or not np.array_equal(keys[pos], query)):
            raise ValueError("a pair's query key is not among the keys")
        offsets = np.zeros(len(keys) + 1, np.int64)
        np.cumsum(np.bincount(pos, minlength=len(keys)), out=offsets[1:])
        return cls(keys, offsets, ids.astype(np.int64), scores)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def pairs(self) -> int:
        """Total number of (query, neighbour) entries."""
        return len(self.ids)

    def rows(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of each key in the table, -1 where the key was not a query."""
        keys = np.asarray(keys, np.int64)
        pos = np.searchsorted(self.keys, keys)
        pos = np.minimum(pos, max(len(self.keys) - 1, 0))
        found = self.keys[pos] == keys if len(self.keys) else np.zeros(len(keys), bool)
        return np.where(found, pos, -1)

    def get(self, row: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.generic]]:
        """Neighbour ids and scores of table row ``row``."""
        lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
        return self.ids[lo:hi], self.scores[lo:hi]
