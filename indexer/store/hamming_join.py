"""Hamming self-joins of a corpus's 64-bit hashes: every hash's radius neighbours and k nearest.

Dedup asks the same questions of every corpus item that an audit asks of a test image (the
items within ``radius`` bits of its pHash and of its mirrored stand-in; the ``k`` nearest as
verification candidates), but for all of them at once. Answers depend on the hash value only,
so each distinct query value is searched once and the result is keyed by the value.

* Radius: multi-index hashing (``hamming_mih``), exact up to ``MAX_EXACT_RADIUS`` bits and
  sub-linear: ~0.4 s per 100k queries against 1M hashes (docs/scale.md). Wider radii fall back
  to FAISS brute force.
* k nearest: exhaustive FAISS search while ``queries x corpus <= BRUTE_PAIRS`` (the audit's
  own answer, tie order included); beyond, the ``k`` nearest within
  ``min(max_radius, MAX_EXACT_RADIUS)`` bits found by multi-index hashing — exact up to that
  radius, and a hash whose k-th neighbour lies farther gets fewer candidates.
"""

from __future__ import annotations

import logging

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS, MultiIndexHash, sorted_unique
from splitaudit.indexer.store.neighbours import Neighbours

log = logging.getLogger(__name__)
BRUTE_PAIRS = 2_000_000_000  # query x corpus hash comparisons done exhaustively (~2-4 CPU-s)
_BRUTE_CHUNK = 65_536


def as_keys(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Unsigned hash values as the int64 keys a ``Neighbours`` table is sorted by."""
    return np.ascontiguousarray(values, dtype=np.uint64).view(np.int64)


class HammingJoin:
    """Self-join searches over one store's hashes (the hash tables are built once)."""

    def __init__(self, store: BinaryStore) -> None:
        self.store = store
        self._mih: MultiIndexHash | None = store.mih

    def mih(self) -> MultiIndexHash:
        """The store's multi-index hash tables, built here if it has none (exact at any size)."""
        if self._mih is None:
            self._mih = MultiIndexHash(*self.store.codes_and_ids())
        return self._mih

    def radius(
        self, queries: npt.NDArray[np.uint64], radius: int, *, mirror: int | None = None
    ) -> Neighbours:
        """Every stored hash within ``radius`` bits (inclusive) of each distinct query value.

        When the queries include most stored values (a dedup), those are answered by one
        self-join of the store (``MultiIndexHash.self_join``: each pair of hashes checked once,
        not once from each side); with ``mirror``, so are the queries that are a stored value
        ``^ mirror`` (the mirrored stand-ins). Queries given as values followed by the same
        values ``^`` one constant (dedup's ``np.r_[hashes, hashes ^ MIRROR_MASK]``) name their
        ``mirror`` themselves. Any other query is searched on its own. The answer is the same
        either way.
        """
        if mirror is None:
            mirror = stand_in_mask(queries)
        values = sorted_unique(np.asarray(queries, np.uint64))
        if self.store.count == 0 or len(values) == 0:
            return _empty(values)
        if radius > MAX_EXACT_RADIUS:
            found = self.store.search_radius(values, radius)
            ids = np.concatenate([i for i, _ in found])
            dists = np.concatenate([d for _, d in found]).astype(np.int32)
            offsets = np.r_[0, np.cumsum([len(i) for i, _ in found])].astype(np.int64)
            return Neighbours.from_pairs(
                as_keys(values),
                np.repeat(as_keys(values), np.diff(offsets)),
                ids,
                dists,
                k=None,
                descending=False,
            )
        mih = self.mih()
        parts: list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.int32]]]
        parts = []
        rest = np.ones(len(values), bool)
        for m in (0,) if mirror is None else (0, int(mirror) & (2**64 - 1)):
            stand_ins = sorted_unique(mih.codes ^ np.uint64(m))
            asked = rest & _member(values, stand_ins)
            if 2 * int(asked.sum()) < len(stand_ins):  # a self-join: ~half a search per hash
                continue
            a, b, dist = mih.self_join(radius, m)
            asker = np.r_[mih.codes[a], mih.codes[b]] ^ np.uint64(m)
            ids, dist = np.r_[mih.ids[b], mih.ids[a]], np.r_[dist, dist]
            if asked.sum() < len(stand_ins):  # answers only for the values asked
                keep = _member(asker, values[asked])
                asker, ids, dist = asker[keep], ids[keep], dist[keep]
            parts.append((asker, ids, dist))
            rest &= ~asked
        if rest.any():
            offsets, ids, dists = mih.search_radius_csr(values[rest], radius)
            parts.append((np.repeat(values[rest], np.diff(offsets)), ids, dists))
        query = np.concatenate([p[0] for p in parts])
        ids = np.concatenate([p[1] for p in parts])
        dists = np.concatenate([p[2] for p in parts]).astype(np.int32)
        # a pair joined from both of its hashes, or from two copies of one value: once (its
        # distance is the same both times; dropped by the grouping sort, ~1 CPU-s at 1M)
        return Neighbours.from_pairs(
            as_keys(values),
            as_keys(query),
            ids,
            dists,
            k=None,
            descending=False,
            unique=len(parts) > 1 or not rest.all(),
        )

    def knn(
        self,
        queries: npt.NDArray[np.uint64],
        k: int,
        max_radius: int,
        *,
        mirror: int | None = None,
    ) -> Neighbours:
        """The ``k`` nearest stored hashes within ``max_radius`` bits of each distinct query
        value (``mirror``: as for ``radius``)."""
        if mirror is None:
            mirror = stand_in_mask(queries)
        values = sorted_unique(np.asarray(queries, np.uint64))
        if self.store.count == 0 or len(values) == 0:
            return _empty(values)
        if len(values) * self.store.count <= BRUTE_PAIRS:
            parts_q, parts_i, parts_d = [], [], []
            for s in range(0, len(values), _BRUTE_CHUNK):
                part = values[s : s + _BRUTE_CHUNK]
                dists, ids = self.store.search_knn(part, k)
                keep = (ids >= 0) & (dists <= max_radius)
                parts_q.append(np.repeat(as_keys(part), keep.sum(axis=1)))
                parts_i.append(ids[keep])
                parts_d.append(dists[keep].astype(np.int32))
            return Neighbours.from_pairs(
                as_keys(values),
                np.concatenate(parts_q),
                np.concatenate(parts_i),
                np.concatenate(parts_d),
                k=k,
                descending=False,
            )
        return self.knn_join(values, max_radius, mirror).best(k)

    def knn_join(
        self, values: npt.NDArray[np.uint64], max_radius: int, mirror: int | None
    ) -> Neighbours:
        """The radius join at ``min(max_radius, MAX_EXACT_RADIUS)`` that the k-NN past
        ``BRUTE_PAIRS`` takes its k best from (saying so when that cuts ``max_radius``); its
        entries within a smaller radius are that radius's table."""
        radius = min(max_radius, MAX_EXACT_RADIUS)
        if radius < max_radius:
            log.info(
                "hash k-NN of %d values against %d hashes: candidates within %d bits (exact), "
                "not %d",
                len(values),
                self.store.count,
                radius,
                max_radius,
            )
        return self.radius(values, radius, mirror=mirror)

    def radius_and_knn(
        self,
        queries: npt.NDArray[np.uint64],
        radius: int,
        k: int,
        max_radius: int,
        *,
        mirror: int | None = None,
    ) -> tuple[Neighbours, Neighbours]:
        """``radius(queries, radius)`` and ``knn(queries, k, max_radius)`` at once: where the
        k-NN is answered by multi-index hashing (past ``BRUTE_PAIRS``) it is the k best of a
        radius join at the k-NN's exact radius, and the radius table is that join's entries
        within ``radius``, so one self-join answers both (the same tables as the two calls;
        at 1M hashes the radius-8 join was ~18% of the pair). Else the two are searched
        apart."""
        if mirror is None:
            mirror = stand_in_mask(queries)
        values = sorted_unique(np.asarray(queries, np.uint64))
        wide_radius = min(max_radius, MAX_EXACT_RADIUS)
        brute = len(values) * self.store.count <= BRUTE_PAIRS
        if brute or radius > wide_radius or self.store.count == 0 or len(values) == 0:
            within = self.radius(values, radius, mirror=mirror)
            return within, self.knn(values, k, max_radius, mirror=mirror)
        return self.joined_tables(values, radius, k, max_radius, mirror)

    def joined_tables(
        self,
        values: npt.NDArray[np.uint64],
        radius: int,
        k: int,
        max_radius: int,
        mirror: int | None,
    ) -> tuple[Neighbours, Neighbours]:
        """Both tables from the k-NN's multi-index join whatever the number of values (a
        shard of a join past ``BRUTE_PAIRS`` too): its entries within ``radius`` (at most the
        exact radius) and its ``k`` best."""
        wide = self.knn_join(values, max_radius, mirror)
        return wide.within(radius), wide.best(k)


def stand_in_mask(queries: npt.NDArray[np.uint64]) -> int | None:
    """The constant ``c`` when ``queries`` are values followed by the same values ``^ c``
    (``np.r_[hashes, hashes ^ c]``: a dedup's hashes and their mirrored stand-ins), else None."""
    q = np.asarray(queries, np.uint64)
    half = len(q) // 2
    if half == 0 or len(q) % 2:
        return None
    x = q[:half] ^ q[half:]
    return int(x[0]) if x[0] != 0 and bool(np.all(x == x[0])) else None


def _member(
    values: npt.NDArray[np.uint64], sorted_set: npt.NDArray[np.uint64]
) -> npt.NDArray[np.bool_]:
    """Whether each of ``values`` is in ``sorted_set`` (ascending, unique)."""
    if not len(sorted_set):
        return np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return np.asarray(sorted_set[pos] == values)


def _empty(values: npt.NDArray[np.uint64]) -> Neighbours:
    return Neighbours(
        sorted_unique(as_keys(values)),
        np.zeros(len(sorted_unique(values)) + 1, np.int64),
        np.empty(0, np.int64),
        np.empty(0, np.int32),
    )
