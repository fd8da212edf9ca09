"""Exact top-k inner-product search in numpy blocks (BLAS), used for Flat search and ground truth.

numpy's BLAS is several times faster than the one bundled in the faiss-cpu wheel on the
machines measured (see docs/scale.md), and blocks keep the score matrix small.

Every product runs on one BLAS thread (``one_blas_thread``), its query blocks spread over a
thread pool instead: on some CPUs OpenBLAS's multi-threaded kernels round a product
differently from its one-thread kernel (measured on AVX2 EPYC: scores 1 ulp apart), so a
search whose bits must not depend on who runs it (the Ray shards replay the local search's
products) cannot ride on whatever thread count the process happens to hold.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.cpus import usable_cpus

S = TypeVar("S")
T = TypeVar("T")

DB_BLOCK = 16_384
QUERY_BLOCK = 1024


class TopK:
    """Running top-``k`` (highest score first) per query over database blocks fed in any order."""

    def __init__(self, nq: int, k: int) -> None:
        self.k = k
        self.scores = np.full((nq, k), -np.inf, dtype=np.float32)
        self.ids = np.full((nq, k), -1, dtype=np.int64)

    def update(self, scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64]) -> None:
        """Merge a ``(nq, m)`` block of scores whose columns are items ``ids``."""
        self.update_rows(slice(None), scores, ids)

    def update_rows(
        self,
        rows: npt.NDArray[np.int64] | slice,
        scores: npt.NDArray[np.float32],
        ids: npt.NDArray[np.int64],
    ) -> None:
        """Merge ``scores`` (one row per selected query, columns = items ``ids``) into ``rows``."""
        m = scores.shape[1]
        if m == 0 or scores.shape[0] == 0:
            return
        kk = min(self.k, m)
        part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        cand_s = np.concatenate([self.scores[rows], np.take_along_axis(scores, part, 1)], axis=1)
        cand_i = np.concatenate([self.ids[rows], ids[part]], axis=1)
        sel = np.argpartition(-cand_s, self.k - 1, axis=1)[:, : self.k]
        self.scores[rows] = np.take_along_axis(cand_s, sel, 1)
        self.ids[rows] = np.take_along_axis(cand_i, sel, 1)

    def update_dot(
        self,
        queries: npt.NDArray[np.float32],
        base: npt.NDArray[np.floating[Any]],
        ids: npt.NDArray[np.int64],
    ) -> None:
        """Merge the inner products of ``queries`` with ``base`` rows, in blocks (bounded memory;
        float16 rows are widened a block at a time)."""
        for bs in range(0, len(base), DB_BLOCK):
            block = np.asarray(base[bs : bs + DB_BLOCK], dtype=np.float32)
            self.update(queries @ block.T, ids[bs : bs + DB_BLOCK])

    def result(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """(scores, ids) sorted best first; missing slots have id -1 and score -inf."""
        order = np.argsort(-self.scores, axis=1, kind="stable")
        return np.take_along_axis(self.scores, order, 1), np.take_along_axis(self.ids, order, 1)


def exact_search(
    queries: npt.NDArray[np.float32],
    base: npt.NDArray[np.floating[Any]],
    ids: npt.NDArray[np.int64],
    k: int,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Exact top-``k`` inner products of ``queries`` against ``base`` rows (labelled ``ids``):
    1,024-query blocks, one BLAS thread each, as many blocks at once as there are CPUs."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    out_s = np.empty((len(q), k), np.float32)
    out_i = np.empty((len(q), k), np.int64)

    def block(qs: int) -> None:
        top = TopK(len(q[qs : qs + QUERY_BLOCK]), k)
        top.update_dot(q[qs : qs + QUERY_BLOCK], base, ids)
        out_s[qs : qs + QUERY_BLOCK], out_i[qs : qs + QUERY_BLOCK] = top.result()

    with one_blas_thread():
        for _ in in_parallel(block, range(0, len(q), QUERY_BLOCK)):
            pass
    return out_s, out_i


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Products inside run on one BLAS thread (the process-wide setting is restored after)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def in_parallel(work: Callable[[int], T], starts: range) -> Iterator[T]:
    """``work(start)`` for each start, in order, on up to one thread per usable CPU (numpy
    releases the GIL in products and partitions)."""
    yield from ordered_map(work, starts, min(usable_cpus(), len(starts)))


def ordered_map(work: Callable[[S], T], items: Iterable[S], workers: int) -> Iterator[T]:
    """``work(item)`` for each of ``items``, in order, on ``workers`` threads, at most
    ``workers + 1`` items taken ahead of the results read (``items`` may be a generator of
    large batches: they are not all drawn at once, unlike ``Executor.map``)."""
    if workers <= 1:
        yield from map(work, items)
        return
    with ThreadPoolExecutor(workers) as pool:
        pending: deque[Future[T]] = deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def recall_at_k(found: npt.NDArray[np.int64], truth: npt.NDArray[np.int64]) -> float:
    """Mean fraction of each query's true neighbours (ids >= 0) that ``found`` also returned."""
    hits = total = 0
    for f, t in zip(found, truth, strict=True):
        want = set(t[t >= 0].tolist())
        hits += len(want & set(f.tolist()))
        total += len(want)
    return hits / total if total else 1.0
