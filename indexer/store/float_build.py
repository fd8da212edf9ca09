"""Build a float index from a corpus's vector batch files, streaming: Flat, or IVF trained + calibrated.

An IVF build reads the batches twice, one chunk in memory at a time: pass 1 gathers a random
training sample and ``calibration_queries`` held-back rows; spherical k-means (numpy BLAS)
gives the ``nlist`` centroids; pass 2 adds every vector and, on the same chunks, computes the
exact top-k of the held-back queries. ``nprobe`` is then the smallest that reaches the recall
target; recall, curve and parameters go into the sidecar's params.

Beyond ``IndexPolicy.ondisk_min`` vectors the lists never sit in memory all at once: pass 2
fills in-memory shards of ``ondisk_shard_rows`` vectors, writes each to a temporary file,
and merges them into one on-disk inverted-list file (``embeddings.<token>.ivfdata``, next to
``embeddings.faiss``) that FAISS memory-maps (``OnDiskInvertedLists``). Adding batches to
such an index merges the old file and the new shards into a new file (crash-safe: the old
one is only deleted once the new index is saved).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store.calibrate import (
    BatchRef,
    CalibrationSet,
    TruthAccumulator,
    gather_rows,
    iter_chunks,
    perturbed_queries,
    tune_nprobe,
)
from splitaudit.indexer.store.float_index import (
    IVFDATA_SUFFIX,
    TEMPLATE_FILE,
    FloatStore,
    apply_search_params,
    quiet_stdout,
)
from splitaudit.indexer.store.policy import IndexPolicy

log = logging.getLogger(__name__)
STORAGE_CODES = {"fp32": "Flat", "fp16": "SQfp16", "sq8": "SQ8"}


def build_flat(
    corpus_dir: Path, batches: Sequence[BatchRef], *, model_id: str, dim: int
) -> FloatStore:
    """An exact Flat store holding every batch."""
    store = FloatStore.create(model_id=model_id, dim=dim)
    for ids, vecs in iter_chunks(corpus_dir, batches):
        store.add(ids, vecs)
    return store


def spherical_kmeans(
    x: npt.NDArray[np.float32], k: int, *, iters: int, rng: np.random.Generator
) -> npt.NDArray[np.float32]:
    """``k`` unit centroids of unit rows ``x`` (inner-product k-means; empty clusters reseeded)."""
    cent = x[rng.choice(len(x), k, replace=False)].copy()
    for _ in range(iters):
        assign = np.concatenate(
            [np.argmax(x[s : s + 8192] @ cent.T, axis=1) for s in range(0, len(x), 8192)]
        )
        order = np.argsort(assign, kind="stable")
        counts = np.bincount(assign, minlength=k)
        nonempty = np.flatnonzero(counts)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[nonempty]
        sums = np.add.reduceat(x[order], starts, axis=0)
        cent[nonempty] = sums
        empty = np.flatnonzero(counts == 0)
        if len(empty):
            cent[empty] = x[rng.choice(len(x), len(empty), replace=False)]
        cent /= np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-12)
    return cent.astype(np.float32)


def new_ivf(
    dim: int, centroids: npt.NDArray[np.float32], storage: str, train: npt.NDArray[np.float32]
) -> Any:
    """An empty trained IVF index (ids stored in the lists, hash-table direct map for reconstruct)."""
    import faiss

    nlist = len(centroids)
    quantizer: Any = faiss.IndexFlatIP(dim)
    quantizer.add(np.ascontiguousarray(centroids))
    index: Any
    if storage == "fp32":
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    else:
        qtype = (
            faiss.ScalarQuantizer.QT_fp16 if storage == "fp16" else faiss.ScalarQuantizer.QT_8bit
        )
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, nlist, qtype, faiss.METRIC_INNER_PRODUCT
        )
        index.by_residual = False
    index.train(np.ascontiguousarray(train))  # centroids are set: trains only the SQ ranges
    index.set_direct_map_type(faiss.DirectMap.Hashtable)  # type: ignore[attr-defined]
    index.own_fields = True
    quantizer.this.disown()
    return index


def build_ivf(
    corpus_dir: Path,
    batches: Sequence[BatchRef],
    *,
    model_id: str,
    dim: int,
    storage: str,
    policy: IndexPolicy,
) -> FloatStore:
    """Train, fill and calibrate an IVF store over every batch (two streaming passes)."""
    started = time.perf_counter()
    total = sum(n for _, n in batches)
    nlist = policy.nlist_for(total)
    rng = np.random.default_rng(policy.seed)
    n_query = min(policy.calibration_queries, total // 5)
    n_train = min(total - n_query, policy.train_per_list * nlist)
    chosen = rng.choice(total, n_train + n_query, replace=False)
    train_pos, query_pos = chosen[:n_train], chosen[n_train:]
    _, train = gather_rows(corpus_dir, batches, train_pos)
    query_ids, query_base = gather_rows(corpus_dir, batches, query_pos)
    log.info("IVF build: %d vectors, nlist %d, training on %d", total, nlist, len(train))
    centroids = spherical_kmeans(train, nlist, iters=policy.kmeans_iters, rng=rng)
    index = new_ivf(dim, centroids, storage, train)
    del train
    itype = f"IVF{nlist},{STORAGE_CODES[storage]}"
    store = FloatStore(index, model_id=model_id, dim=dim, index_type=itype, params={})
    cal = CalibrationSet(
        queries=perturbed_queries(query_base, rng) if n_query else query_base, source_ids=query_ids
    )
    truth = TruthAccumulator(cal, policy.calibration_k)
    ondisk = policy.wants_ondisk(total)
    shards = ShardedIVF(index, corpus_dir, model_id, dim, policy.ondisk_shard_rows)
    if ondisk:
        for left in corpus_dir.glob(".ivf-shard-*.faiss"):  # of a build killed midway
            left.unlink(missing_ok=True)
        save_template(index, corpus_dir)
    for ids, vecs in iter_chunks(corpus_dir, batches):
        if ondisk:
            shards.add(ids, vecs)
        else:
            store.add(ids, vecs)
        truth.update(ids, vecs)
    if ondisk:
        store.index = shards.merge()
    store.params = {
        "storage": storage,
        "ivf_storage": storage,
        "nlist": nlist,
        "built_for": total,
        "train_size": n_train,
    }
    if ondisk:
        store.params["ivfdata"] = shards.data_name
    calibrate_ivf(store, truth.finish(), policy)
    store.params["build_seconds"] = round(time.perf_counter() - started, 2)
    return store


def calibrate_ivf(store: FloatStore, cal: CalibrationSet, policy: IndexPolicy) -> None:
    """Choose ``nprobe`` for the recall target on ``cal``; record it and the measurement in params."""
    if len(cal.queries) == 0:
        store.params.update(nprobe=store.params.get("nlist", 1), recall_at_10=None)
        apply_search_params(store.index, store.params)
        return
    nlist = int(store.params["nlist"])

    def set_nprobe(n: int) -> None:
        store.index.nprobe = n

    def search(q: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
        return store.search(q, k)[1]

    nprobe, recall, curve = tune_nprobe(
        set_nprobe, search, cal, nlist=nlist, k=policy.calibration_k, target=policy.recall_target
    )
    store.params.update(
        nprobe=nprobe,
        recall_at_10=round(recall, 4),
        recall_target=policy.recall_target,
        calibration_queries=len(cal.queries),
        calibrated_count=store.count,
        nprobe_curve=[[n, round(r, 4)] for n, r in curve],
    )
    log.info(
        "IVF calibrated: nprobe %d -> recall@%d %.4f on %d held-back queries",
        nprobe,
        policy.calibration_k,
        recall,
        len(cal.queries),
    )


def recalibrate_ivf(
    store: FloatStore, corpus_dir: Path, batches: Sequence[BatchRef], policy: IndexPolicy
) -> None:
    """Re-measure recall and re-tune ``nprobe`` after the index grew (two streaming passes)."""
    total = sum(n for _, n in batches)
    rng = np.random.default_rng(policy.seed + total)
    n_query = min(policy.calibration_queries, total)
    ids, base = gather_rows(corpus_dir, batches, rng.choice(total, n_query, replace=False))
    truth = TruthAccumulator(
        CalibrationSet(queries=perturbed_queries(base, rng), source_ids=ids), policy.calibration_k
    )
    for chunk_ids, vecs in iter_chunks(corpus_dir, batches):
        truth.update(chunk_ids, vecs)
    calibrate_ivf(store, truth.finish(), policy)


class ShardedIVF:
    """Fills an empty trained IVF index into on-disk inverted lists, one bounded shard in memory.

    ``add`` puts vectors into an in-memory copy of ``empty`` (no direct map) and writes it to a
    temporary file every ``shard_rows`` vectors; ``merge`` joins those files (memory-mapped),
    and any ``extra`` inverted lists, into one ``OnDiskInvertedLists`` file in ``folder``.
    """

    def __init__(self, empty: Any, folder: Path, model_id: str, dim: int, shard_rows: int) -> None:
        self.empty, self.folder = empty, folder
        self.model_id, self.dim, self.shard_rows = model_id, dim, shard_rows
        self.paths: list[Path] = []
        self.current: FloatStore | None = None
        self.data_name = ""

    def add(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add vectors (unit rows) under item ids; spills the shard to disk when full."""
        import faiss

        if self.current is None:
            shard = faiss.clone_index(self.empty)
            shard.set_direct_map_type(faiss.DirectMap.NoMap)  # type: ignore[attr-defined]
            self.current = FloatStore(
                shard, model_id=self.model_id, dim=self.dim, index_type="IVF-shard"
            )
        self.current.add(ids, vectors)
        if self.current.count >= self.shard_rows:
            self._spill()

    def _spill(self) -> None:
        import faiss

        assert self.current is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f".ivf-shard-{uuid.uuid4().hex[:12]}.faiss"
        faiss.write_index(self.current.index, str(path))
        self.paths.append(path)
        self.current = None

    def merge(self, extra: Sequence[Any] = ()) -> Any:
        """The filled index: a copy of ``empty`` over one new on-disk inverted-list file, with a
        hash-table direct map (``reconstruct(item_id)``). Removes the shard files."""
        import faiss

        if self.current is not None and self.current.count:
            self._spill()
        self.current = None
        opened: list[Any] = []
        lists: Any = faiss.InvertedListsPtrVector()  # type: ignore[attr-defined]
        try:
            for path in self.paths:
                shard: Any = faiss.read_index(
                    str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY
                )
                opened.append(shard)
                lists.push_back(shard.invlists)
            for invlists in extra:
                lists.push_back(invlists)
            self.data_name = f"embeddings.{uuid.uuid4().hex[:12]}{IVFDATA_SUFFIX}"
            index: Any = faiss.clone_index(self.empty)
            index.set_direct_map_type(faiss.DirectMap.NoMap)  # type: ignore[attr-defined]
            ondisk: Any = faiss.OnDiskInvertedLists(
                index.nlist, index.code_size, str(self.folder / self.data_name)
            )
            with quiet_stdout():  # (it prints every file resize)
                ntotal = ondisk.merge_from_multiple(lists.data(), lists.size(), False)
            index.replace_invlists(ondisk, True)
            ondisk.this.disown()
            index.ntotal = int(ntotal)
        finally:
            del lists, opened
            for path in self.paths:
                path.unlink(missing_ok=True)
            self.paths = []
        index.set_direct_map_type(faiss.DirectMap.Hashtable)  # type: ignore[attr-defined]
        return index


def save_template(index: Any, folder: Path) -> None:
    """Write the trained, empty copy of an on-disk IVF index (what later additions start from)."""
    import faiss

    from splitaudit.indexer.store.atomic import atomic_write_with

    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_with(folder / TEMPLATE_FILE, lambda p: faiss.write_index(index, p))


def extend_ondisk(
    store: FloatStore, corpus_dir: Path, batches: Sequence[BatchRef], policy: IndexPolicy
) -> None:
    """Add batches to an on-disk IVF store: the old lists and the new shards merged into a new
    file (the old file stays until the caller saves; ``FloatStore.save`` then removes it)."""
    import faiss

    if not batches:
        return
    try:
        empty = faiss.read_index(str(corpus_dir / TEMPLATE_FILE))
    except RuntimeError as exc:
        raise IndexMismatchError(f"cannot read {corpus_dir / TEMPLATE_FILE}: {exc}") from exc
    shards = ShardedIVF(empty, corpus_dir, store.model_id, store.dim, policy.ondisk_shard_rows)
    for ids, vecs in iter_chunks(corpus_dir, batches):
        shards.add(ids, vecs)
    nprobe = int(store.index.nprobe)
    store.index = shards.merge(extra=[store.index.invlists])
    store.index.nprobe = nprobe
    store.params["ivfdata"] = shards.data_name
