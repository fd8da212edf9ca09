"""Who runs dedup's self-joins: here (``LocalSelfJoins``) or cut into shards (``sharded_join``).

``pairs.join_corpus`` asks three questions of the whole corpus — the Hamming radius join, the
Hamming k-nearest join (both at once, ``hash_tables``) and the vector self-join — through one
of these objects, so the same join code runs on one machine or fans out to Ray actors with
the same tables as the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.calibrate import iter_chunks
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_join import HammingJoin
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.vector_join import JoinReport, self_join

BatchRefs = Sequence[tuple[str, int]]  # a corpus's vector batch files: (name, rows)


class LocalSelfJoins:
    """The self-joins in this process (the hash tables built once per store)."""

    def __init__(self) -> None:
        self._joiner: HammingJoin | None = None

    def _hashes(self, store: BinaryStore) -> HammingJoin:
        if self._joiner is None or self._joiner.store is not store:
            self._joiner = HammingJoin(store)
        return self._joiner

    def hash_radius(
        self,
        store: BinaryStore,
        queries: npt.NDArray[np.uint64],
        radius: int,
        *,
        mirror: int | None = None,
    ) -> Neighbours:
        """Every hash of ``store`` within ``radius`` bits of each distinct query value
        (``mirror``: the queries include the stored values ``^ mirror``, see ``HammingJoin``)."""
        return self._hashes(store).radius(queries, radius, mirror=mirror)

    def hash_knn(
        self,
        store: BinaryStore,
        queries: npt.NDArray[np.uint64],
        k: int,
        max_radius: int,
        *,
        mirror: int | None = None,
    ) -> Neighbours:
        """The ``k`` nearest hashes of ``store`` within ``max_radius`` bits of each query value."""
        return self._hashes(store).knn(queries, k, max_radius, mirror=mirror)

    def hash_tables(
        self,
        store: BinaryStore,
        queries: npt.NDArray[np.uint64],
        radius: int,
        k: int,
        max_radius: int,
        *,
        mirror: int | None = None,
    ) -> tuple[Neighbours, Neighbours]:
        """``hash_radius`` and ``hash_knn`` of the same queries, from one self-join where the
        k-NN is one (``HammingJoin.radius_and_knn``)."""
        return self._hashes(store).radius_and_knn(queries, radius, k, max_radius, mirror=mirror)

    def vectors(
        self,
        store: FloatStore,
        corpus_dir: Path,
        refs: BatchRefs,
        *,
        k: int,
        floor: float,
        cosine: float,
    ) -> tuple[Neighbours, JoinReport]:
        """Each vector of the batches ``refs``' ``k`` nearest in ``store`` at cosine >= ``floor``."""
        return self_join(
            store, lambda: iter_chunks(corpus_dir, list(refs)), k=k, floor=floor, cosine=cosine
        )
