"""A corpus's hash index cut into shards for Ray actors, and its searches merged exactly.

Only a large hash index with multi-index tables is cut (``HASH_SHARD_MIN`` hashes or more, its
k-NN within the candidate radius answered by the tables): there both searches the audit engine
makes merge exactly. A radius search is exact
in every store and returns each row's hits in corpus order, so shards of consecutive corpus
positions, concatenated in order, give the whole store's answer; the k nearest within a
radius are ranked by (distance, id), so the best ``k`` of every shard's best ``k``, ranked the
same way (``hamming_mih.top_k_rows``), are the whole store's. A smaller index (exhaustive
FAISS k-NN, whose ties fall by scan order) stays whole in every actor; it is small.

``plan_hash_shards`` (driver) finds the hashes and ids in the saved ``IndexBinaryIDMap2``
file and cuts them into ranges of positions; a ``HashShard`` (actor) maps only its range and
builds a ``BinaryStore`` (with its tables) of it; ``ShardedHashes`` stands in for the whole
store in the audit engine, asking every shard.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store import binary_index
from splitaudit.indexer.store.binary_index import BinaryStore, SearchResult, bytes_to_hashes
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS, top_k_rows

# ask(method, *args) -> every shard's answer, in shard order
Ask = Callable[..., list[Any]]
# Below this many hashes every actor holds the whole index (~0.2 KB per hash, 1 GB at 5M): a
# table probe costs the same in a shard as in the whole index, so n shards probe n times as
# much (measured at 150k hashes, 2 shards: +4 CPU-s on a 20,000-query audit) for memory that
# does not matter yet.
HASH_SHARD_MIN = 5_000_000


@dataclass(frozen=True)
class HashSpec:
    """Positions ``start:stop`` of a saved hash index: hashes (8 bytes each) at
    ``codes_offset`` and item ids at ``ids_offset`` of ``path``, both for position 0."""

    shard: int
    path: str
    total: int
    start: int
    stop: int
    codes_offset: int
    ids_offset: int
    params: dict[str, Any] = field(default_factory=dict)


def shardable(store: BinaryStore) -> bool:
    """Whether ``store``'s searches merge exactly from shards (its tables answer its k-NN)."""
    return store.mih is not None and store.knn_exact_radius <= MAX_EXACT_RADIUS and store.count > 0


def plan_hash_shards(
    store: BinaryStore, folder: Path, parts: int, least: int = HASH_SHARD_MIN
) -> list[HashSpec]:
    """``parts`` shards of the hash index saved in ``folder`` (``store``: the driver's), or
    none when it is not ``shardable`` or holds fewer than ``least`` hashes."""
    if not shardable(store) or parts < 2 or store.count < least:
        return []
    path = folder / binary_index.INDEX_FILE
    n = store.count
    ids_offset = path.stat().st_size - 8 * n
    codes_offset = ids_offset - 8 - 8 * n
    with open(path, "rb") as fh:
        fh.seek(codes_offset - 8)
        codes_len = int(np.frombuffer(fh.read(8), np.uint64)[0])
        fh.seek(ids_offset - 8)
        ids_len = int(np.frombuffer(fh.read(8), np.uint64)[0])
    if codes_len != 8 * n or ids_len != n:
        raise IndexMismatchError(f"{path}: not the layout of a binary index with an id map")
    cuts = [round(n * p / parts) for p in range(parts + 1)]
    specs = [
        HashSpec(i, str(path), n, a, b, codes_offset, ids_offset, dict(store.params))
        for i, (a, b) in enumerate(itertools.pairwise(cuts))
    ]
    codes, ids = store.codes_and_ids()
    for spec in (specs[0], specs[-1]):
        got_codes, got_ids = HashShard.read(spec)
        if not (
            np.array_equal(got_codes[-1:], codes[spec.stop - 1 : spec.stop])
            and np.array_equal(got_ids[-1:], ids[spec.stop - 1 : spec.stop])
        ):
            raise IndexMismatchError(f"{path}: the mapped hashes differ from the index's")
    return specs


class HashShard:
    """One range of a hash index, searched as a ``BinaryStore`` of its own (tables included)."""

    def __init__(self, spec: HashSpec) -> None:
        self.spec = spec
        codes, ids = self.read(spec)
        self.store = BinaryStore.create()
        self.store.add(np.array(ids), codes)
        self.store.params = dict(spec.params)
        self.store.use_mih(True)

    @staticmethod
    def read(spec: HashSpec) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """The shard's hashes (unsigned) and item ids, mapped from the index file."""
        rows = spec.stop - spec.start
        if rows == 0:
            return np.empty(0, np.uint64), np.empty(0, np.int64)
        raw = np.memmap(spec.path, np.uint8, "r", spec.codes_offset + 8 * spec.start, (rows, 8))
        ids = np.memmap(spec.path, np.int64, "r", spec.ids_offset + 8 * spec.start, (rows,))
        return bytes_to_hashes(np.asarray(raw)), ids

    def search_radius(self, hashes: npt.NDArray[np.uint64], radius: int) -> SearchResult:
        """``BinaryStore.search_radius`` of this shard."""
        return self.store.search_radius(hashes, radius)

    def search_knn_within(
        self, hashes: npt.NDArray[np.uint64], k: int, radius: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """``BinaryStore.search_knn_within`` of this shard."""
        return self.store.search_knn_within(hashes, k, radius)


class ShardedHashes(BinaryStore):
    """The whole hash index's ``search_radius`` and ``search_knn_within``, from its shards."""

    def __init__(self, count: int, params: dict[str, Any], ask: Ask) -> None:
        super().__init__(_Counted(count))
        self.params = dict(params)
        self.index_type = binary_index.MIH_TYPE
        self.ask = ask

    def search_radius(
        self, hashes: npt.NDArray[np.uint64], radius: int, *, max_results: int | None = None
    ) -> SearchResult:
        """Each row's hits within ``radius``, in corpus order (shard by shard); with
        ``max_results``, the nearest ones of those, as the whole index's tables keep them."""
        q = np.asarray(hashes, dtype=np.uint64)
        if len(q) == 0 or self.count == 0:
            return [(np.empty(0, np.int64), np.empty(0, np.int32)) for _ in range(len(q))]
        answers = self.ask("search_radius", q, radius)
        hits = [
            (
                np.concatenate([a[r][0] for a in answers]).astype(np.int64),
                np.concatenate([a[r][1] for a in answers]).astype(np.int32),
            )
            for r in range(len(q))
        ]
        if max_results is None:
            return hits
        return [binary_index.nearest_hits(i, d, max_results) for i, d in hits]

    def search_knn_within(
        self, hashes: npt.NDArray[np.uint64], k: int, radius: int
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
        """The ``k`` nearest within ``radius`` (exact within ``knn_exact_radius``), ties by id."""
        q = np.asarray(hashes, dtype=np.uint64)
        within = min(radius, self.knn_exact_radius)
        if len(q) == 0:
            return np.zeros((0, k), np.int32), np.zeros((0, k), np.int64)
        answers = self.ask("search_knn_within", q, k, radius)
        dists = np.concatenate([d for d, _i in answers], axis=1)
        ids = np.concatenate([i for _d, i in answers], axis=1)
        valid = ids >= 0
        offsets = np.r_[0, np.cumsum(valid.sum(axis=1))].astype(np.int64)
        return top_k_rows(offsets, ids[valid], dists[valid].astype(np.int32), k, within + 1)


class _Counted:
    """What ``BinaryStore`` reads of its FAISS index: ``ntotal``."""

    def __init__(self, count: int) -> None:
        self.ntotal = count
