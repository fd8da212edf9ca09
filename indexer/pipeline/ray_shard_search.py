"""A top-k vector search fanned out to the shards of a float index and merged on the driver.

``ShardedSearch.search(queries, k)`` returns what ``FloatStore.search(queries, k)`` of the
whole index returns, bit for bit and tie for tie, from ``ray_shards.FloatShard`` pieces:

* ``Flat``: each shard scores its database blocks against the queries with the local exact
  search's products (1,024-query blocks, one BLAS thread each) and keeps, per block,
  the candidates ``TopK.update`` would take from it; the driver replays the ``TopK`` merges in
  block order, so even tied scores end in the same slots;
* IVF, list by list (a large query batch): the driver runs the coarse quantizer exactly as
  the local search does, sends each shard the probes of its lists; the shards return each
  list's candidates, and the driver replays the local scan's merges (its rows skipped where
  no score can enter, its lists dealt to ``SCAN_THREADS`` top-k merged by ``merge_tops``);
* IVF through FAISS's own search (a small batch): the driver assigns the probes as
  ``IndexIVF.search`` does (per OpenMP slice), each shard scans its lists with FAISS's
  ``search_preassigned``, the driver keeps the best ``k``. FAISS breaks ties by the order it
  meets candidates, which a merge cannot see: rows whose merged top ``k + 1`` holds a tied
  score are searched again on the driver's own index with the same probes (rare: equal
  vectors in the corpus).

Shards are reached through ``submit(shard, method, *args)`` (a handle) and ``gather(handles)``
(their values): Ray actors on the driver (``ray_match``), ``FloatShard`` objects in process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.cpus import usable_cpus
from splitaudit.indexer.pipeline.ray_shards import ListPart, ShardSpec, replay_part
from splitaudit.indexer.store.exact import QUERY_BLOCK, TopK
from splitaudit.indexer.store.float_index import (
    SCAN_THREADS,
    FloatStore,
    list_probes,
    merge_tops,
    padded,
)

Result = tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
# submit(shard, method, *args) -> a handle; gather(handles) -> their values, in order
Submit = Callable[..., Any]
Gather = Callable[[list[Any]], list[Any]]


def scan_parts(n: int, spans: Sequence[tuple[npt.NDArray[np.int64], ListPart]], k: int) -> TopK:
    """``FloatStore._scan_lists`` from each list's candidates: ``(query rows, (rows sent,
    part))`` per list. Rows none of whose scores beats their ``k``-th best skip the merge, as
    there (a row's best score in a list is in its part; rows the shard did not send are such)."""
    top = TopK(n, k)
    for qrows, (keep, (scores, ids)) in spans:
        if scores.shape[1] == 0 and keep is None:
            continue  # an empty list
        if keep is not None:  # the list holds at least k items
            qrows = qrows[keep]
            live = np.flatnonzero(
                scores.max(axis=1, initial=-np.inf) > top.scores[qrows].min(axis=1)
            )
            if len(live) < len(qrows):
                qrows, scores, ids = qrows[live], scores[live], ids[live]
        replay_part(top, qrows, (scores, ids))
    return top


class ShardedSearch:
    """``FloatStore.search`` of ``store``'s index, answered by its ``specs`` shards.

    ``store``: the driver's open index (its centroids, the choice of search path, and the
    re-search of tied rows on FAISS's path).
    """

    def __init__(
        self,
        store: FloatStore,
        specs: Sequence[ShardSpec],
        submit: Submit,
        gather: Gather,
    ) -> None:
        self.store, self.specs = store, list(specs)
        self.submit, self.gather = submit, gather
        self.researched = 0  # rows of FAISS's path searched again on the driver (ties)

    def search(self, queries: npt.NDArray[np.float32], k: int) -> Result:
        """As ``self.store.search(queries, k)``."""
        return self.begin(queries, k)()

    def begin(self, queries: npt.NDArray[np.float32], k: int) -> Callable[[], Result]:
        """Send the shards their pieces of ``search(queries, k)`` now; the returned function
        waits for them and merges (so the next search can start meanwhile)."""
        store = self.store
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if len(q) == 0 or store.count == 0:
            empty = np.zeros((len(q), k), np.float32), np.full((len(q), k), -1, np.int64)
            return lambda: empty
        kk = min(k, store.count)
        if store.is_exact:
            merge = self._flat(q, kk)
        elif store.by_list(len(q)):
            merge = self._by_list(q, kk)
        else:
            merge = self._faiss(q, kk)
        return lambda: padded(*merge(), k)

    def _flat(self, q: npt.NDArray[np.float32], k: int) -> Callable[[], Result]:
        handles = [self.submit(s.shard, "flat_parts", q, k) for s in self.specs]
        return lambda: self._flat_merge(q, k, handles)

    def _flat_merge(self, q: npt.NDArray[np.float32], k: int, handles: list[Any]) -> Result:
        blocks = [part for parts in self.gather(handles) for part in parts]  # block order
        out_s = np.empty((len(q), k), np.float32)
        out_i = np.empty((len(q), k), np.int64)
        for qs in range(0, len(q), QUERY_BLOCK):
            rows = slice(qs, qs + QUERY_BLOCK)
            top = TopK(len(q[rows]), k)
            for scores, ids in blocks:
                replay_part(top, slice(None), (scores[rows], ids[rows]))
            out_s[rows], out_i[rows] = top.result()
        return out_s, out_i

    def _by_list(self, q: npt.NDArray[np.float32], k: int) -> Callable[[], Result]:
        """``FloatStore._search_by_list``'s coarse step here, its list products on the shards."""
        index = self.store.index
        by_list, rows, starts, bounds = list_probes(
            q, self.store.centroids(), int(index.nprobe), int(index.nlist)
        )
        probed = by_list[starts]
        # as FloatStore._search_by_list: every n-th list into one of n top-k, then merged
        n_threads = max(1, min(SCAN_THREADS, usable_cpus(), len(probed) // 16))
        handles, spans = [], []
        for spec in self.specs:
            lo, hi = np.searchsorted(probed, [spec.start, spec.stop])
            spans.append((int(lo), int(hi)))
            if hi > lo:
                a, b = int(bounds[lo]), int(bounds[hi])
                handles.append(
                    self.submit(
                        spec.shard,
                        "list_parts",
                        q,
                        probed[lo:hi],
                        rows[a:b],
                        bounds[lo : hi + 1] - a,
                        k,
                        int(lo),
                        n_threads,
                    )
                )

        def merge() -> Result:
            parts = [part for got in self.gather(handles) for part in got]  # list order
            spans = [(rows[bounds[j] : bounds[j + 1]], part) for j, part in enumerate(parts)]
            tops = [scan_parts(len(q), spans[t::n_threads], k) for t in range(n_threads)]
            return tops[0].result() if n_threads == 1 else merge_tops(tops, k)

        return merge

    def _faiss(self, q: npt.NDArray[np.float32], k: int) -> Callable[[], Result]:
        keys, coarse = self.assign(q)
        handles = [self.submit(s.shard, "faiss_search", q, k + 1, keys, coarse) for s in self.specs]
        return lambda: self._faiss_merge(q, k, keys, coarse, self.gather(handles))

    def _faiss_merge(
        self,
        q: npt.NDArray[np.float32],
        k: int,
        keys: npt.NDArray[np.int64],
        coarse: npt.NDArray[np.float32],
        found: list[Result],
    ) -> Result:
        all_s = np.concatenate([s for s, _i in found], axis=1)
        all_i = np.concatenate([i for _s, i in found], axis=1)
        all_s = np.where(all_i >= 0, all_s, -np.inf).astype(np.float32)
        order = np.argsort(-all_s, axis=1, kind="stable")
        best_s = np.take_along_axis(all_s, order, 1)[:, : k + 1]
        best_i = np.take_along_axis(all_i, order, 1)[:, : k + 1]
        real = best_s > -np.inf
        tied = ((best_s[:, 1:] == best_s[:, :-1]) & real[:, 1:]).any(axis=1)
        scores = np.ascontiguousarray(best_s[:, :k])
        ids = np.ascontiguousarray(best_i[:, :k])
        ids[~real[:, :k]] = -1
        if tied.any():  # FAISS keeps tied candidates by the order it meets them: ask it
            rows = np.flatnonzero(tied)
            self.researched += len(rows)
            s, i = self.store.index.search_preassigned(
                np.ascontiguousarray(q[rows]),
                k,
                np.ascontiguousarray(keys[rows]),
                np.ascontiguousarray(coarse[rows]),
            )
            scores[rows], ids[rows] = s, i
        return scores, ids

    def assign(
        self, q: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The probes (lists, coarse scores) ``IndexIVF.search`` assigns ``q``: its quantizer
        searched per OpenMP slice of the batch, one BLAS thread inside a parallel region."""
        import faiss

        index = self.store.index
        nprobe = min(int(index.nprobe), int(index.nlist))
        n = len(q)
        nt = min(int(faiss.omp_get_max_threads()), n)
        keys = np.empty((n, nprobe), np.int64)
        coarse = np.empty((n, nprobe), np.float32)
        for part in range(nt):
            a, b = n * part // nt, n * (part + 1) // nt
            if b <= a:
                continue
            with threadpool_limits(limits=1 if nt > 1 else None):
                coarse[a:b], keys[a:b] = index.quantizer.search(q[a:b], nprobe)
        return keys, coarse
