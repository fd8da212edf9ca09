"""Multi-index hashing: exact sub-linear Hamming range search over 64-bit hashes (numpy).

The 64 bits are cut into ``len(BLOCKS)`` blocks. If two hashes differ in at most ``r`` bits,
at least one block differs in at most ``r // len(BLOCKS)`` bits (pigeonhole), so probing,
per block, every bucket within that many bit flips of the query's block finds every hash
within ``r`` — exactly, no recall loss. Each block is a sorted permutation of the items plus a
dense offsets table (``2**width`` entries), so a probe is two array reads. Candidates are then
checked with a full 64-bit popcount. Cost grows with the number of probes, so callers use
it for small radii (``MAX_EXACT_RADIUS``) and brute force beyond.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

# (shift, width) of each block of the unsigned 64-bit value, most significant first.
BLOCKS: tuple[tuple[int, int], ...] = ((42, 22), (21, 21), (0, 21))
MAX_BLOCK_RADIUS = 3
MAX_EXACT_RADIUS = len(BLOCKS) * (MAX_BLOCK_RADIUS + 1) - 1  # 11 bits
_MAX_CANDIDATES = 8_000_000  # per query chunk, to bound memory

SearchResult = list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]]


@lru_cache(maxsize=32)
def flip_masks(width: int, radius: int) -> npt.NDArray[np.int64]:
    """Every ``width``-bit mask with at most ``radius`` bits set (0 first)."""
    masks = [0]
    for r in range(1, radius + 1):
        masks.extend(sum(1 << b for b in bits) for bits in combinations(range(width), r))
    return np.asarray(masks, dtype=np.int64)


def block_keys(values: npt.NDArray[np.uint64], shift: int, width: int) -> npt.NDArray[np.int64]:
    """The ``width``-bit block starting at bit ``shift`` of each value."""
    return ((values >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.int64)


class MultiIndexHash:
    """Bucket tables over hashes ``codes`` (unsigned) whose item ids are ``ids``."""

    def __init__(self, codes: npt.NDArray[np.uint64], ids: npt.NDArray[np.int64]) -> None:
        self.codes = np.ascontiguousarray(codes, dtype=np.uint64)
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        pos_type = np.int32 if len(self.codes) < 2**31 else np.int64
        self._tables: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]] = []
        # per block: which buckets are non-empty, one byte each (2 MiB: stays in cache, so
        # most probes, which find nothing, cost one cached read)
        self._occupied: list[npt.NDArray[np.bool_]] = []
        for shift, width in BLOCKS:
            keys = block_keys(self.codes, shift, width)
            order = np.argsort(keys, kind="stable").astype(pos_type)
            counts = np.bincount(keys, minlength=1 << width)
            offsets = np.zeros((1 << width) + 1, dtype=pos_type)
            offsets[1:] = np.cumsum(counts)
            self._tables.append((order, offsets))
            self._occupied.append(counts > 0)

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def nbytes(self) -> int:
        """Memory held by the tables (codes and ids included)."""
        return int(
            self.codes.nbytes
            + self.ids.nbytes
            + sum(o.nbytes + off.nbytes for o, off in self._tables)
        )

    def search_radius(self, queries: npt.NDArray[np.uint64], radius: int) -> SearchResult:
        """For each query, the ids within Hamming ``radius`` (inclusive) and their distances."""
        if radius > MAX_EXACT_RADIUS:
            raise ValueError(f"multi-index hashing is exact only up to radius {MAX_EXACT_RADIUS}")
        q = np.ascontiguousarray(queries, dtype=np.uint64)
        out: SearchResult = []
        start = 0
        while start < len(q):
            chunk = q[start : start + 1024]
            out.extend(self._search_chunk(chunk, radius))
            start += len(chunk)
        return out

    def _candidates(
        self, q: npt.NDArray[np.uint64], radius: int, limit: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """(query row, item position) pairs found by the probes of every block; ``None`` when
        there would be more than ``limit`` (the caller splits the queries)."""
        per_block = radius // len(BLOCKS)
        found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
        total = 0
        for (shift, width), (_order, offsets), occupied in zip(
            BLOCKS, self._tables, self._occupied, strict=True
        ):
            masks = flip_masks(width, per_block)
            probes = (block_keys(q, shift, width)[:, None] ^ masks[None, :]).ravel()
            hit = np.flatnonzero(occupied[probes])
            keys = probes[hit]
            lo = offsets[keys].astype(np.int64)
            cnt = offsets[keys + 1].astype(np.int64) - lo
            found.append((hit // len(masks), lo, cnt))
            total += int(cnt.sum())
            if limit is not None and total > limit:
                return None
        rows: list[npt.NDArray[np.int64]] = []
        positions: list[npt.NDArray[np.int64]] = []
        for (order, _offsets), (qrow, lo, cnt) in zip(self._tables, found, strict=True):
            n = int(cnt.sum())
            if n == 0:
                continue
            base = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
            positions.append(order[np.arange(n, dtype=np.int64) + base].astype(np.int64))
            rows.append(np.repeat(qrow, cnt))
        if not rows:
            empty = np.empty(0, np.int64)
            return empty, empty
        return np.concatenate(rows), np.concatenate(positions)

    def search_radius_csr(
        self, queries: npt.NDArray[np.uint64], radius: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """``search_radius`` as flat arrays: (offsets, ids, distances); query ``i``'s hits are
        ``ids[offsets[i]:offsets[i + 1]]``. No per-query objects: for joins of millions."""
        if radius > MAX_EXACT_RADIUS:
            raise ValueError(f"multi-index hashing is exact only up to radius {MAX_EXACT_RADIUS}")
        q = np.ascontiguousarray(queries, dtype=np.uint64)
        counts: list[npt.NDArray[np.int64]] = []
        ids: list[npt.NDArray[np.int64]] = []
        dists: list[npt.NDArray[np.int32]] = []
        for start in range(0, len(q), 1024):
            for c, i, d in self._search_chunk_csr(q[start : start + 1024], radius):
                counts.append(c)
                ids.append(i)
                dists.append(d)
        offsets = np.zeros(len(q) + 1, np.int64)
        if counts:
            np.cumsum(np.concatenate(counts), out=offsets[1:])
        return (
            offsets,
            np.concatenate(ids) if ids else np.empty(0, np.int64),
            np.concatenate(dists) if dists else np.empty(0, np.int32),
        )

    def _search_chunk(self, q: npt.NDArray[np.uint64], radius: int) -> SearchResult:
        out: SearchResult = []
        for counts, ids, dist in self._search_chunk_csr(q, radius):
            bounds = np.r_[0, np.cumsum(counts)]
            out.extend(
                (ids[bounds[i] : bounds[i + 1]], dist[bounds[i] : bounds[i + 1]])
                for i in range(len(counts))
            )
        return out

    def _search_chunk_csr(
        self, q: npt.NDArray[np.uint64], radius: int
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]]:
        """(hits per query, ids, distances) for consecutive parts of ``q`` (memory-bounded)."""
        found = self._candidates(q, radius, _MAX_CANDIDATES if len(q) > 1 else None)
        if found is None:
            half = len(q) // 2
            return self._search_chunk_csr(q[:half], radius) + self._search_chunk_csr(
                q[half:], radius
            )
        rows, pos = found
        dist = np.bitwise_count(self.codes[pos] ^ q[rows]).astype(np.int32)
        hit = dist <= radius
        rows, pos, dist = rows[hit], pos[hit], dist[hit]
        # the same item can be found through several blocks: keep it once
        pair = rows * len(self.codes) + pos
        pair, first = np.unique(pair, return_index=True)
        rows, pos, dist = rows[first], pos[first], dist[first]
        counts = np.bincount(rows, minlength=len(q)).astype(np.int64)
        return [(counts, self.ids[pos], dist)]
