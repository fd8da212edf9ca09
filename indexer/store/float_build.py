"""Build a float index from a corpus's vector batch files, streaming: Flat, or IVF trained + calibrated.

An IVF build reads the batches twice, one chunk in memory at a time: pass 1 gathers a random
training sample and ``calibration_queries`` held-back rows; spherical k-means (numpy BLAS)
gives the ``nlist`` centroids; pass 2 adds every vector and, on the same chunks, computes the
exact top-k of the held-back queries. ``nprobe`` is then the smallest that reaches the recall
target; recall, curve and parameters go into the sidecar's params.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.calibrate import (
    BatchRef,
    CalibrationSet,
    TruthAccumulator,
    gather_rows,
    iter_chunks,
    perturbed_queries,
    tune_nprobe,
)
from splitaudit.indexer.store.float_index import FloatStore, apply_search_params
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
    for ids, vecs in iter_chunks(corpus_dir, batches):
        store.add(ids, vecs)
        truth.update(ids, vecs)
    store.params = {
        "storage": storage,
        "ivf_storage": storage,
        "nlist": nlist,
        "built_for": total,
        "train_size": n_train,
    }
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
