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
_QUERY_CHUNK = 128  # queries per pass: candidate arrays stay cache-sized (measured 1.8x faster than 1024 at 10M)

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
        # per block: the item positions sorted by block key, the codes in that same order (so a
        # bucket's codes are one contiguous run: candidates are read sequentially, not gathered
        # at random from the whole corpus, measured 5-10x faster at 10M) and the bucket offsets
        self._tables: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]] = []
        self._sorted_codes: list[npt.NDArray[np.uint64]] = []
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
            self._sorted_codes.append(self.codes[order])
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
            + sum(c.nbytes for c in self._sorted_codes)
        )

    def search_radius(self, queries: npt.NDArray[np.uint64], radius: int) -> SearchResult:
        """For each query, the ids within Hamming ``radius`` (inclusive) and their distances."""
        if radius > MAX_EXACT_RADIUS:
            raise ValueError(f"multi-index hashing is exact only up to radius {MAX_EXACT_RADIUS}")
        q = np.ascontiguousarray(queries, dtype=np.uint64)
        out: SearchResult = []
        start = 0
        while start < len(q):
            chunk = q[start : start + _QUERY_CHUNK]
            out.extend(self._search_chunk(chunk, radius))
            start += len(chunk)
        return out

    def _probes(
        self, q: npt.NDArray[np.uint64], radius: int, limit: int | None = None
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]] | None:
        """Per block, the non-empty buckets the queries probe as (query row, start, size) in the
        block's sorted order; ``None`` when they hold more than ``limit`` candidates in all (the
        caller splits the queries)."""
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
        return found

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
        for start in range(0, len(q), _QUERY_CHUNK):
            for c, i, d in self._search_chunk_csr(q[start : start + _QUERY_CHUNK], radius):
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
        found = self._probes(q, radius, _MAX_CANDIDATES if len(q) > 1 else None)
        if found is None:
            half = len(q) // 2
            return self._search_chunk_csr(q[:half], radius) + self._search_chunk_csr(
                q[half:], radius
            )
        hit_rows: list[npt.NDArray[np.int64]] = []
        hit_pos: list[npt.NDArray[np.int64]] = []
        hit_dist: list[npt.NDArray[np.int64]] = []
        for (order, _offsets), sorted_codes, (qrow, lo, cnt) in zip(
            self._tables, self._sorted_codes, found, strict=True
        ):
            n = int(cnt.sum())
            if n == 0:
                continue
            ends = np.cumsum(cnt)
            at = np.arange(n, dtype=np.int64) + np.repeat(lo - (ends - cnt), cnt)
            dist = np.bitwise_count(sorted_codes[at] ^ np.repeat(q[qrow], cnt))
            hit = np.flatnonzero(dist <= radius)
            # the query row of a hit: the probe whose run holds it (few hits, many candidates)
            hit_rows.append(qrow[np.searchsorted(ends, hit, side="right")])
            hit_pos.append(order[at[hit]].astype(np.int64))
            hit_dist.append(dist[hit].astype(np.int64))
        if not hit_rows:
            return [(np.zeros(len(q), np.int64), np.empty(0, np.int64), np.empty(0, np.int32))]
        rows, pos, dist = (
            np.concatenate(hit_rows),
            np.concatenate(hit_pos),
            np.concatenate(hit_dist),
        )
        # the same item can be found through several blocks: keep it once
        pair = rows * len(self.codes) + pos
        pair, first = np.unique(pair, return_index=True)
        rows, pos, dist = rows[first], pos[first], dist[first]
        counts = np.bincount(rows, minlength=len(q)).astype(np.int64)
        return [(counts, self.ids[pos], dist.astype(np.int32))]

    def search_knn_within(
        self, queries: npt.NDArray[np.uint64], k: int, radius: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """The ``k`` nearest hashes within ``radius`` (exact) per query, as ``(distances, ids)``
        of shape ``(n, k)``, nearest first (ties by id); id -1 (distance ``radius + 1``) pads."""
        offsets, ids, dists = self.search_radius_csr(queries, radius)
        return top_k_rows(offsets, ids, dists, k, radius + 1)


def top_k_rows(
    offsets: npt.NDArray[np.int64],
    ids: npt.NDArray[np.int64],
    dists: npt.NDArray[np.int32],
    k: int,
    pad_dist: int,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """CSR hits -> the ``k`` nearest per row as ``(n, k)`` arrays (id -1, ``pad_dist`` pad)."""
    n = len(offsets) - 1
    out_d = np.full((n, k), pad_dist, np.int32)
    out_i = np.full((n, k), -1, np.int64)
    if len(ids) == 0 or k == 0:
        return out_d, out_i
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    order = np.lexsort((ids, dists, rows))
    rank = np.arange(len(order), dtype=np.int64) - offsets[rows[order]]
    keep = order[rank < k]
    rk = rank[rank < k]
    out_d[rows[keep], rk] = dists[keep]
    out_i[rows[keep], rk] = ids[keep]
    return out_d, out_i
