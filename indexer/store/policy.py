"""Which index type a store uses at which size, and how hard it is calibrated (one value object)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS

Storage = Literal["auto", "fp32", "fp16", "sq8"]
STORAGES: tuple[str, ...] = ("auto", "fp32", "fp16", "sq8")
DEFAULT_IVF_STORAGE = "fp16"


@dataclass(frozen=True, slots=True)
class IndexPolicy:
    """Size thresholds and calibration settings for a corpus's derived FAISS indexes.

    Float vectors: exact ``Flat`` (fp32) up to ``flat_max`` vectors; beyond it an IVF index
    (``nlist`` ~ sqrt(n), trained on a sample) with ``storage`` codes, whose ``nprobe`` is the
    smallest that reaches ``recall_target`` recall@10 against exact search on
    ``calibration_queries`` held-back queries. ``storage="auto"`` keeps what an existing
    index uses (fp16 for a new one). Hashes: exhaustive up to ``hash_flat_max``, then a
    multi-index hash table (exact for radius <= ``mih.MAX_EXACT_RADIUS``) is added; with it,
    the verification candidates (k nearest within ``hash_candidate_radius``) are searched in
    the tables, exact within ``hash_knn_radius`` bits (above ``MAX_EXACT_RADIUS``: exhaustive
    k-NN, linear in the corpus).
    ``mmap`` loads an index that needs no update memory-mapped (read-only) for serving.
    From ``ondisk_min`` vectors an IVF is built shard by shard (``ondisk_shard_rows`` vectors in
    memory at a time) into on-disk inverted lists, memory-mapped when searched.
    """

    flat_max: int = 100_000
    storage: Storage = "auto"
    hash_flat_max: int = 100_000
    hash_knn_radius: int = MAX_EXACT_RADIUS
    hash_candidate_radius: int = 20
    recall_target: float = 0.995
    calibration_queries: int = 500
    calibration_k: int = 10
    train_per_list: int = 40
    kmeans_iters: int = 10
    regrow_factor: float = 4.0
    recalibrate_factor: float = 1.5
    mmap: bool = True
    ondisk_min: int = 2_000_000
    ondisk_shard_rows: int = 1_000_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise UsageError(f"index storage {self.storage!r} is not one of {', '.join(STORAGES)}")
        if not 0.0 < self.recall_target <= 1.0:
            raise UsageError(f"recall_target must lie in (0, 1], got {self.recall_target}")
        if self.flat_max < 1 or self.hash_flat_max < 1:
            raise UsageError("flat_max and hash_flat_max must be at least 1")

    def wants_ivf(self, count: int) -> bool:
        """Whether ``count`` vectors call for an IVF index rather than exact Flat."""
        return count > self.flat_max

    def wants_ondisk(self, count: int) -> bool:
        """Whether an IVF of ``count`` vectors keeps its lists on disk (built shard by shard)."""
        return count >= self.ondisk_min

    def nlist_for(self, count: int) -> int:
        """IVF list count for ``count`` vectors: a power of two near sqrt(count), 64..65536."""
        target = math.sqrt(max(count, 1))
        return int(min(65536, max(64, 2 ** round(math.log2(target)))))


def resolve_storage(requested: str, existing: str | None) -> str:
    """The IVF storage to use: an explicit request wins, else the existing one, else fp16."""
    if requested != "auto":
        return requested
    return existing or DEFAULT_IVF_STORAGE
