"""FAISS float index over L2-normalised embeddings (inner product = cosine); ids are item ids.

Two families, chosen by size (``IndexPolicy``) and named in the sidecar's ``index_type``:
``Flat`` — an exact ``IndexIDMap2(IndexFlatIP)``, searched with numpy BLAS; and
``IVF{nlist},{Flat|SQfp16|SQ8}`` — an inverted-file index whose lists hold item ids directly
(with a hash-table direct map so ``index.reconstruct(item_id)`` works), built and calibrated
by ``float_build``. Its ``nprobe`` is recorded in the sidecar's params and applied on load.
A large IVF keeps its lists in an on-disk file (params ``ivfdata``, memory-mapped by FAISS's
``OnDiskInvertedLists``) beside ``embeddings.faiss``, which then holds only the centroids and
the id map.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.cpus import usable_cpus
from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store.atomic import atomic_write_with
from splitaudit.indexer.store.exact import TopK, exact_search
from splitaudit.indexer.store.sidecar import Sidecar

METRIC = "inner_product"
INDEX_FILE = "embeddings.faiss"
SIDECAR_FILE = "embeddings.json"
IVFDATA_SUFFIX = ".ivfdata"
TEMPLATE_FILE = "embeddings.trained.faiss"  # an on-disk IVF's trained empty index
FLAT_TYPE = "Flat"
# Batched IVF search pays off when each probed list is shared by this many queries (measured).
BATCHED_PER_LIST = 64
# Threads scanning the inverted lists of one batched search (each on one BLAS thread). One:
# two were slower on the shared 2-core machine (10k queries x 10M, 38.9-41.6 s wall and
# 25-29 CPU-s against 32.8-35.2 s and 23.3-23.6 CPU-s); more may pay on idle cores.
SCAN_THREADS = 1


def padded(
    scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], k: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """A search's answer as ``FloatStore.search`` returns it: scores 0 where no id (-1), and
    ``k`` columns (an index of fewer than ``k`` vectors pads with id -1, score 0)."""
    scores = np.where(ids >= 0, scores, 0).astype(np.float32)
    if ids.shape[1] < k:
        pad = k - ids.shape[1]
        scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=0)
        ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=-1)
    return scores, ids


def list_probes(
    q: npt.NDArray[np.float32], centroids: npt.NDArray[np.float32], nprobe: int, nlist: int
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """The list-by-list search's plan: each query's ``nprobe`` nearest lists (by centroid
    score, 4,096 queries at a time), grouped by list. Returns ``(by_list, rows, starts,
    bounds)``: probes sorted by list number (stable, so query order within a list), the query
    row of each probe, where each probed list's run starts, and the runs' bounds (``starts``
    plus the end). The Ray shards' search replays the same plan (``pipeline.ray_shard_search``)."""
    coarse = (
        np.concatenate(
            [
                np.argpartition(-(q[s : s + 4096] @ centroids.T), nprobe - 1, axis=1)[:, :nprobe]
                for s in range(0, len(q), 4096)
            ]
        )
        if nprobe < nlist
        else np.tile(np.arange(nlist), (len(q), 1))
    )
    lists = coarse.ravel()
    order = np.argsort(lists, kind="stable")
    by_list, rows = lists[order], np.repeat(np.arange(len(q)), coarse.shape[1])[order]
    starts = np.flatnonzero(np.r_[True, by_list[1:] != by_list[:-1]])
    bounds = np.r_[starts, len(by_list)]
    return by_list, rows, starts, bounds


class FloatStore:
    """A float index (Flat or IVF) plus its sidecar state."""

    def __init__(
        self,
        index: Any,
        *,
        model_id: str,
        dim: int,
        sidecar: Sidecar | None = None,
        index_type: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.index = index
        self.model_id = model_id
        self.dim = dim
        self.generation = sidecar.generation if sidecar else 0
        self.last_batch_id = sidecar.last_batch_id if sidecar else 0
        self.index_type = index_type or (sidecar.index_type if sidecar else FLAT_TYPE)
        self.params: dict[str, Any] = dict(
            params if params is not None else (sidecar.params if sidecar else {})
        )
        self._ids: npt.NDArray[np.int64] | None = None
        self._centroids: npt.NDArray[np.float32] | None = None

    @classmethod
    def create(cls, *, model_id: str, dim: int) -> FloatStore:
        """An empty exact (Flat) store."""
        import faiss

        return cls(faiss.IndexIDMap2(faiss.IndexFlatIP(dim)), model_id=model_id, dim=dim)

    @classmethod
    def load(cls, folder: Path, *, model_id: str, dim: int, mmap: bool = False) -> FloatStore:
        """Load from ``folder``; refuses a sidecar for another model/dim/metric.

        ``mmap=True`` maps the vectors (Flat) or inverted lists (IVF) read-only instead of
        reading them into memory: for serving; such a store cannot be added to.
        """
        import faiss

        side = Sidecar.load(folder / SIDECAR_FILE)
        side.check(
            kind="float", model_id=model_id, dim=dim, metric=METRIC, path=folder / SIDECAR_FILE
        )
        ondisk = bool(side.params.get("ivfdata"))
        # on-disk lists are always memory-mapped; the flag finds their file next to the index
        flags = faiss.IO_FLAG_ONDISK_SAME_DIR if ondisk else 0
        if mmap:
            flags |= faiss.IO_FLAG_READ_ONLY
            if not ondisk:  # (IO_FLAG_MMAP on an on-disk index crashes its searches)
                flags |= (
                    faiss.IO_FLAG_MMAP_IFC if side.index_type == FLAT_TYPE else faiss.IO_FLAG_MMAP
                )
        try:
            with quiet_stdout():  # FAISS prints where it finds the on-disk lists
                index = faiss.read_index(str(folder / INDEX_FILE), flags)
        except RuntimeError as exc:
            raise IndexMismatchError(
                f"cannot read {folder / INDEX_FILE}: {exc}; rebuild the index"
            ) from exc
        if index.ntotal != side.count or index.d != dim:
            raise IndexMismatchError(
                f"{folder / INDEX_FILE} holds {index.ntotal} vectors of dim {index.d} but its "
                f"sidecar says {side.count} of dim {side.dim}; rebuild the index"
            )
        store = cls(index, model_id=model_id, dim=dim, sidecar=side)
        if "efSearch" in side.params or "nprobe" in side.params:
            apply_search_params(index, side.params)
        return store

    @property
    def count(self) -> int:
        """Number of vectors held."""
        return int(self.index.ntotal)

    @property
    def is_ondisk(self) -> bool:
        """Whether the IVF lists live in an on-disk file (extended by merging, not in place)."""
        return bool(self.params.get("ivfdata"))

    @property
    def is_exact(self) -> bool:
        """Whether search is exhaustive over fp32 vectors (a Flat index)."""
        return self.index_type == FLAT_TYPE

    def add(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add vectors (rows must already be L2-normalised) under the given item ids."""
        if len(ids) == 0:
            return
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise IndexMismatchError(
                f"vectors of shape {vecs.shape} do not fit an index of dim {self.dim}"
            )
        xids = np.ascontiguousarray(ids, dtype=np.int64)
        self._ids = None
        if self.is_exact:
            self.index.add_with_ids(vecs, xids)
            return
        import faiss

        # Coarse assignment with numpy BLAS (faster than faiss's bundled BLAS), then add_core.
        assign = np.empty(len(vecs), np.int64)
        centroids = self.centroids()
        for s in range(0, len(vecs), 8192):
            assign[s : s + 8192] = np.argmax(vecs[s : s + 8192] @ centroids.T, axis=1)
        self.index.add_core(
            len(vecs), faiss.swig_ptr(vecs), faiss.swig_ptr(xids), faiss.swig_ptr(assign)
        )

    def centroids(self) -> npt.NDArray[np.float32]:
        """The IVF coarse centroids (``nlist x dim``)."""
        if self._centroids is None:
            import faiss

            quantizer: Any = faiss.downcast_index(self.index.quantizer)
            n = int(quantizer.ntotal)
            self._centroids = (
                faiss.rev_swig_ptr(quantizer.get_xb(), n * self.dim).reshape(n, self.dim).copy()
            )
        return self._centroids

    def vectors_view(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """A Flat store's vectors (a view, valid while the store lives) and their item ids."""
        import faiss

        if not self.is_exact:
            raise IndexMismatchError(f"{self.index_type} index does not hold raw vectors")
        inner: Any = faiss.downcast_index(self.index.index)
        n = self.count
        base = (
            faiss.rev_swig_ptr(inner.get_xb(), n * self.dim).reshape(n, self.dim)
            if n
            else np.empty((0, self.dim), np.float32)
        )
        if self._ids is None or len(self._ids) != n:
            self._ids = faiss.vector_to_array(self.index.id_map).astype(np.int64)
        return base, self._ids

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Top-``k`` cosine scores and item ids per query (id -1 where fewer than k exist)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if len(q) == 0 or self.count == 0:
            return (np.zeros((len(q), k), np.float32), np.full((len(q), k), -1, np.int64))
        kk = min(k, self.count)
        if self.is_exact:
            scores, ids = exact_search(q, *self.vectors_view(), kk)
        elif self.by_list(len(q)):
            scores, ids = self._search_by_list(q, kk)
        else:
            scores, ids = self.index.search(q, kk)
        return padded(scores, ids, k)

    def by_list(self, n_queries: int) -> bool:
        """Whether an IVF search of ``n_queries`` goes list by list (``_search_by_list``) rather
        than through FAISS's own search: enough queries per probed list to batch them."""
        return bool(n_queries * self.index.nprobe >= BATCHED_PER_LIST * self.index.nlist)

    def _search_by_list(
        self, q: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """IVF search list by list: each probed list is decoded once and scored against all the
        queries probing it with one BLAS product (same candidates and scores as FAISS's search)."""
        by_list, rows, starts, bounds = list_probes(
            q, self.centroids(), int(self.index.nprobe), int(self.index.nlist)
        )
        spans = [
            (int(by_list[a]), rows[a:b])
            for a, b in zip(starts.tolist(), bounds[1:].tolist(), strict=True)
        ]
        # ~nlist small products: on BLAS's own threads they spend most of their time starting
        # and stopping threads (measured 8x slower: 4,096 queries x 1M, 26.6 s vs 3.3 s), so
        # they run on one BLAS thread; with SCAN_THREADS > 1 each thread scans every n-th list
        # into its own top-k (numpy releases the GIL in the decode, the product and the partition).
        n_threads = max(1, min(SCAN_THREADS, usable_cpus(), len(spans) // 16))
        with threadpool_limits(limits=1, user_api="blas"):
            if n_threads == 1:
                return self._scan_lists(q, spans, k).result()
            with ThreadPoolExecutor(n_threads) as pool:
                tops = list(
                    pool.map(
                        lambda t: self._scan_lists(q, spans[t::n_threads], k), range(n_threads)
                    )
                )
        return merge_tops(tops, k)

    def _scan_lists(
        self,
        q: npt.NDArray[np.float32],
        spans: list[tuple[int, npt.NDArray[np.int64]]],
        k: int,
    ) -> TopK:
        """The top-``k`` of each query over the given lists: ``(list number, query rows)``.
        A list's scores only enter the (costly) partition for the rows where some score beats
        the row's current ``k``-th best; the others cannot change."""
        top = TopK(len(q), k)
        for list_no, qrows in spans:
            ids, vecs = self.list_vectors(list_no)
            if len(ids) == 0:
                continue
            scores = q[qrows] @ vecs.T
            if len(ids) >= k:
                kth = top.scores[qrows].min(axis=1)
                live = np.flatnonzero((scores > kth[:, None]).any(axis=1))
                if len(live) < len(qrows):
                    qrows, scores = qrows[live], scores[live]
            top.update_rows(qrows, scores, ids)
        return top

    def list_vectors(self, list_no: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The item ids and float32 vectors of one IVF inverted list (decoded from its codes)."""
        import faiss

        invlists = self.index.invlists
        m = int(invlists.list_size(list_no))
        if m == 0:
            return np.empty(0, np.int64), np.empty((0, self.dim), np.float32)
        codes = faiss.rev_swig_ptr(invlists.get_codes(list_no), m * int(self.index.code_size))
        ids = faiss.rev_swig_ptr(invlists.get_ids(list_no), m).astype(np.int64)
        return ids, self._decode(codes, m)

    def _decode(self, codes: npt.NDArray[np.uint8], m: int) -> npt.NDArray[np.float32]:
        """The float32 vectors of one inverted list's codes."""
        storage = self.params.get("storage", "fp16")
        if storage == "fp32":
            return codes.view(np.float32).reshape(m, self.dim)
        if storage == "fp16":
            return codes.view(np.float16).reshape(m, self.dim).astype(np.float32)
        return self.index.sq.decode(codes.reshape(m, -1)).astype(np.float32, copy=False)

    def save(self, folder: Path, *, generation: int, last_batch_id: int) -> None:
        """Atomically write the index, then its sidecar."""
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_with(folder / INDEX_FILE, lambda p: faiss.write_index(self.index, p))
        self.generation, self.last_batch_id = generation, last_batch_id
        self.sidecar().save(folder / SIDECAR_FILE)
        # list files of earlier builds (a reader that still maps one keeps its pages)
        current = self.params.get("ivfdata")
        for stale in folder.glob(f"embeddings.*{IVFDATA_SUFFIX}"):
            if stale.name != current:
                stale.unlink(missing_ok=True)
        if not current:
            (folder / TEMPLATE_FILE).unlink(missing_ok=True)

    def sidecar(self) -> Sidecar:
        """The sidecar describing this store as it is now."""
        return Sidecar(
            kind="float",
            model_id=self.model_id,
            dim=self.dim,
            metric=METRIC,
            count=self.count,
            generation=self.generation,
            last_batch_id=self.last_batch_id,
            index_type=self.index_type,
            params=self.params,
        )


def merge_tops(tops: list[TopK], k: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """One ``(scores, ids)`` top-``k`` (best first) from per-thread top-``k`` of the same queries."""
    scores = np.concatenate([t.scores for t in tops], axis=1)
    ids = np.concatenate([t.ids for t in tops], axis=1)
    keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    top = TopK(len(scores), k)
    top.scores, top.ids = np.take_along_axis(scores, keep, 1), np.take_along_axis(ids, keep, 1)
    return top.result()


def apply_search_params(index: Any, params: dict[str, Any]) -> None:
    """Set ``nprobe`` / ``efSearch`` recorded at build time on a loaded index."""
    import faiss

    inner = faiss.downcast_index(index.index) if hasattr(index, "index") else index
    if "nprobe" in params and hasattr(inner, "nprobe"):
        inner.nprobe = int(params["nprobe"])
    if "efSearch" in params and hasattr(inner, "hnsw"):
        inner.hnsw.efSearch = int(params["efSearch"])


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence C-level writes to stdout (FAISS's on-disk lists print progress with printf),
    which would otherwise mix into a command's own output such as ``--json``."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1: nothing to protect
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            try:
                yield
            finally:
                os.dup2(saved, 1)
    finally:
        os.close(saved)
