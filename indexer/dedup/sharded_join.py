"""The corpus self-joins cut into shards and merged back into the whole join's tables.

Dedup's joins (``pairs.join_corpus``) are split the way each one decomposes:

* **vectors, exhaustive** (a Flat index up to ``vector_join.EXACT_JOIN_MAX``): each shard holds
  a range of whole 16,384-row database blocks (``ray_shards.plan_shards``, only those bytes
  mapped) and runs ``vector_join.exact_join`` of every query against them: the local join's
  products, block for block. A query's ``k`` best of the corpus are the ``k`` best of the
  shards' ``k`` best (ties: lower id, ``Neighbours.from_pairs``), so the merge is exact.
* **vectors, cell by cell**: the driver builds the cells exactly as ``vector_join.self_join``
  does (the IVF store's lists or a k-means partition of a Flat store, cut by ``split_cells``)
  and calibrates the probing once; each shard owns a contiguous range of cells (an IVF shard:
  the sub-cells of a range of lists, only those lists' bytes mapped, ``ray_shards.FloatShard``;
  a k-means shard: its cells' vectors, sent, a Flat index being small). For each query batch
  of ``ivf_join`` the driver runs the coarse step (``join_cells.probe_cells``: the full or the
  two-level step, as calibrated for the whole join), sends each shard the batch and the probes
  of its cells, and the shard scores them as ``ivf_join`` does (one product per cell, one BLAS
  thread, ``_above``); the driver adds the raw pairs in cell order and builds the symmetric
  table as ``ivf_join`` does. Raw pairs, not per-shard top-``k`` tables: a pair found both
  ways can score differently each way (fp16 / sq8 codes against float32 queries) and the
  local join keeps the way it met first, which a shard's truncated table can lose. Where the
  local join regroups cut cells into Voronoi cells (``vector_join.choose_voronoi``), the driver
  runs the coarse pass over every batch first (``vector_join.voronoi_probes``), cuts the
  regrouped cells into ranges of about equal size, sends each shard its cells' vectors, and
  hands each batch's held probes to the shards as above. This
  follows ``ivf_join``'s steps (its private helpers imported): a change there must be made
  here too (``tests/indexer/dedup/test_sharded_join.py`` compares the two).
* **hashes, k nearest**: every distinct query value's answer depends on it alone, so the
  values are cut into ranges, each shard searches its range against the whole hash index
  (``hamming_join.HammingJoin``) and the rows are concatenated. The radius join is not cut:
  asked for (nearly) every stored hash, ``HammingJoin.radius`` answers with one self-join of
  the store (each pair checked once), cheaper whole than any split of its queries.

``JoinShard`` is the shard's side (no Ray: a Ray actor or a test calls it); ``ShardedSelfJoins``
is the driver's, handing the pieces to a ``call`` function that runs them on the shards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.dedup.self_joins import BatchRefs, LocalSelfJoins
from splitaudit.indexer.pipeline.ray_shards import FloatShard, ShardSpec, plan_shards
from splitaudit.indexer.store import hamming_join, vector_join
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.calibrate import iter_chunks
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_join import HammingJoin, as_keys
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS
from splitaudit.indexer.store.join_calibrate import (
    calibrate_gap,
    calibrate_width,
    gap_recall,
    pair_scores,
)
from splitaudit.indexer.store.join_cells import (
    DECODE_CACHE_BYTES,
    Cells,
    cell_lookup,
    ivf_cells,
    kmeans_cells,
    probe_cells,
    split_cells,
)
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.vector_join import (
    JoinPairs,
    JoinReport,
    Probes,
    choose_voronoi,
    exact_join,
    rebatch,
    score_cells,
    voronoi_probes,
)

# call(method, [args of shard 0, args of shard 1, ...]) -> each shard's answer, in order
ShardCall = Callable[[str, list[tuple[Any, ...]]], list[Any]]
# the same, returning at once a function that waits for the answers
ShardSubmit = Callable[[str, list[tuple[Any, ...]]], Callable[[], list[Any]]]


@dataclass(frozen=True)
class CellPlan:
    """The driver's cells and probing: what every shard of a cell-by-cell join shares."""

    centroids: npt.NDArray[np.float32]
    sizes: npt.NDArray[np.int64]
    source: str
    gap: float
    cap: int
    k: int
    floor: float
    graph: npt.NDArray[np.int64] | None = None  # two-level coarse step (``calibrate_width``)


@dataclass(frozen=True)
class VectorShard:
    """One shard of a vector self-join.

    ``kind`` ``exact``: ``spec`` is a Flat row range. ``cells``: the shard owns cells
    ``cells`` (ascending), cell ``cells[n]`` holding ids ``ids[offsets[n]:offsets[n+1]]`` in
    the order ``split_cells`` keeps them; their rows are read from ``spec``'s inverted lists
    (``parents``: each cell's list) or given in ``vectors`` (k-means cells of a Flat store).
    """

    kind: Literal["exact", "cells"]
    shard: int
    spec: ShardSpec | None = None
    cells: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    offsets: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(1, np.int64))
    ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    parents: npt.NDArray[np.int64] | None = None
    vectors: npt.NDArray[np.float32] | None = None


@dataclass(frozen=True)
class ShardAnswer:
    """A vector shard's table, the work its join did and the index bytes it mapped."""

    table: Neighbours
    probes: int = 0
    scored: int = 0
    mapped: int = 0
    cpu_s: float = 0.0


class JoinShard:
    """The shard side of the self-joins: the whole hash index (k nearest of a range of query
    values), and vector shards on request."""

    def __init__(self, hashes: BinaryStore) -> None:
        self.hashes = HammingJoin(hashes)
        self.cells: dict[int, tuple[Cells, int]] = {}  # opened vector shards: cells, bytes mapped

    def hash_knn(
        self,
        values: npt.NDArray[np.uint64],
        k: int,
        max_radius: int,
        whole: int,
        mirror: int | None = None,
    ) -> Neighbours:
        """``HammingJoin.knn`` of these values as the whole join of ``whole`` values answers them:
        exhaustively where it would be, else the ``k`` nearest within the exact radius (a
        shard's fewer values must not switch it to the exhaustive search, whose ties differ)."""
        if whole * self.hashes.store.count <= hamming_join.BRUTE_PAIRS:
            return self.hashes.knn(values, k, max_radius, mirror=mirror)
        return self.hashes.knn_join(values, max_radius, mirror).best(k)

    def hash_tables(
        self,
        values: npt.NDArray[np.uint64],
        radius: int,
        k: int,
        max_radius: int,
        mirror: int | None = None,
    ) -> tuple[Neighbours, Neighbours]:
        """The radius table and the k-NN of these values from one join
        (``HammingJoin.joined_tables``; the whole join is past ``BRUTE_PAIRS``: the caller
        checks)."""
        return self.hashes.joined_tables(values, radius, k, max_radius, mirror)

    def exact_shard(
        self, shard: VectorShard, corpus_dir: Path, refs: BatchRefs, k: int, floor: float
    ) -> ShardAnswer:
        """Every query's ``k`` best rows of this Flat row range (the batches streamed here)."""
        cpu = time.process_time()
        assert shard.spec is not None
        rows = FloatShard(shard.spec)
        queries = iter_chunks(corpus_dir, list(refs))
        table = exact_join(rows.ids, rows.vectors, queries, k=k, floor=floor)
        return ShardAnswer(table, mapped=rows.mapped_bytes(), cpu_s=time.process_time() - cpu)

    def open_cells(self, plan: CellPlan, shard: VectorShard) -> int:
        """Hold ``shard``'s cells for ``cell_pairs``; returns the index bytes it maps (or was sent)."""
        lists = FloatShard(shard.spec) if shard.spec is not None else None
        mapped = lists.mapped_bytes() if lists is not None else 0
        mapped += shard.vectors.nbytes if shard.vectors is not None else 0
        self.cells[shard.shard] = (shard_cells(plan, shard, lists), mapped)
        return mapped

    def cell_pairs(
        self,
        shard: int,
        q: npt.NDArray[np.float32],
        rows: npt.NDArray[np.int64],
        cells: npt.NDArray[np.int64],
        k: int,
        floor: float,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The pairs of query rows ``rows`` with the cells ``cells`` they probe (sorted by cell,
        rows ascending within a cell), as ``vector_join.ivf_join`` scores and keeps them:
        (query row, neighbour id, cosine)."""
        held = self.cells[shard][0]
        return score_cells(held, q, rows, cells, k=k, floor=floor)

    def close_cells(self, shard: int) -> None:
        """Drop a vector shard's cells (its decoded rows)."""
        self.cells.pop(shard, None)


def shard_cells(plan: CellPlan, shard: VectorShard, lists: FloatShard | None) -> Cells:
    """The driver's cells as one shard holds them: its own cells' rows (read from its inverted
    lists, or sent), every other cell empty."""
    owned = {int(c): n for n, c in enumerate(shard.cells.tolist())}
    dim = plan.centroids.shape[1]
    empty = (np.empty(0, np.int64), np.empty((0, dim), np.float32))
    held = int(shard.offsets[-1]) * dim * 4
    cache: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
    last: list[Any] = [None, None]  # the inverted list read last (a list's sub-cells are adjacent)

    def fetch(cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        n = owned.get(int(cell))
        if n is None:
            return empty
        hit = cache.get(n)
        if hit is not None:
            return hit
        lo, hi = int(shard.offsets[n]), int(shard.offsets[n + 1])
        ids = shard.ids[lo:hi]
        if shard.vectors is not None:
            got = (ids, shard.vectors[lo:hi])
        else:
            assert lists is not None and shard.parents is not None
            parent = int(shard.parents[n])
            if last[0] != parent:
                last[0], last[1] = parent, lists.list_vectors(parent)
            list_ids, list_vecs = last[1]
            # the cell's rows in list order, as split_cells cuts them (a list's ids are unique)
            rows = np.flatnonzero(np.isin(list_ids, ids))
            got = (list_ids[rows], np.ascontiguousarray(list_vecs[rows], np.float32))
        if held <= DECODE_CACHE_BYTES:
            cache[n] = got
        return got

    return Cells(plan.centroids, plan.sizes, fetch, source=plan.source, cache_limit=0)


@dataclass
class VectorPlan:
    """The driver's plan of a sharded vector self-join."""

    shards: list[VectorShard]
    cells: CellPlan | None = None
    lookup: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None = None  # id -> cell
    bounds: npt.NDArray[np.int64] | None = None  # shard n owns cells bounds[n]:bounds[n+1]
    recall: float | None = None
    at_floor: float | None = None
    cosine: float | None = None
    coarse: dict[str, Any] | None = None
    cpu_s: dict[str, float] = field(default_factory=dict)
    # the cut cells, to be regrouped into Voronoi cells by the join's coarse pass
    # (``vector_join.choose_voronoi``) before the shards are cut: ``shards`` is empty until then
    regroup: Cells | None = None


def plan_vector_join(
    store: FloatStore,
    folder: Path,
    parts: int,
    *,
    k: int,
    floor: float,
    cosine: float,
    exact_max: int | None = None,
) -> VectorPlan:
    """About ``parts`` shards of ``store``'s self-join (saved in ``folder``), chosen and
    calibrated as ``vector_join.self_join`` chooses and calibrates the whole join; a shard
    owns a contiguous range of cells (an IVF shard: the sub-cells of a range of lists)."""
    exact_max = vector_join.EXACT_JOIN_MAX if exact_max is None else exact_max
    if store.is_exact and store.count <= exact_max:
        flat = plan_shards(store, folder, parts)
        return VectorPlan([VectorShard("exact", n, spec) for n, spec in enumerate(flat)])
    cpu = {"cells": -time.process_time()}
    specs: list[ShardSpec] = []
    parents: Cells | None = None
    if store.is_exact:
        from splitaudit.indexer.store.policy import IndexPolicy

        base, ids = store.vectors_view()
        whole = kmeans_cells(ids.copy(), base, IndexPolicy().nlist_for(store.count))
        unsplit = whole.nlist
        cells = split_cells(whole)
    else:
        parents = ivf_cells(store)
        unsplit = parents.nlist
        cells = split_cells(parents)
        specs = plan_shards(store, folder, parts)
    cpu["calibrate"] = -time.process_time()
    cpu["cells"] -= cpu["calibrate"]
    calibration = pair_scores(cells, cosine)
    gap, cap, recall = calibrate_gap(cells, cosine, scores=calibration)
    graph, coarse = calibrate_width(cells, cosine, gap, scores=calibration)
    voronoi, gap, cap, recall = choose_voronoi(  # as vector_join.self_join
        cells, unsplit, graph, cosine, calibration, (gap, cap, recall)
    )
    at_floor = gap_recall(cells, floor, gap, voronoi=voronoi)
    cpu["calibrate"] += time.process_time()
    plan = CellPlan(cells.centroids, cells.sizes, cells.source, gap, cap, k, floor, graph)
    plan_out = VectorPlan([], plan, None, None, recall, at_floor, cosine, coarse.to_dict())
    plan_out.cpu_s.update(cpu)
    if voronoi:
        plan_out.regroup = cells
        return plan_out
    return cell_shards(plan_out, cells, parts, parents, specs)


def cell_shards(
    plan_out: VectorPlan,
    cells: Cells,
    parts: int,
    parents: Cells | None = None,
    specs: Sequence[ShardSpec] = (),
) -> VectorPlan:
    """``plan_out`` with its shards: contiguous ranges of ``cells``, each an IVF shard (the
    sub-cells of a range of ``parents``' lists, ``specs``) or, without ``parents``, about
    ``parts`` ranges of equal vectors, sent their cells' vectors."""
    plan = plan_out.cells
    assert plan is not None
    cell_ids = [cells.get(c)[0] for c in range(cells.nlist)]
    if parents is not None:
        of_parent = cell_lookup(parents)
        parent = np.array([int(of_parent(i[:1])[0]) if len(i) else -1 for i in cell_ids], np.int64)
        # an empty sub-cell takes the list before it: sub-cells come list by list
        parent = np.maximum.accumulate(np.maximum(parent, 0))
        bounds = np.searchsorted(parent, [spec.start for spec in specs] + [specs[-1].stop])
        bounds[0], bounds[-1] = 0, cells.nlist
    else:
        parent = np.full(cells.nlist, -1, np.int64)
        cuts = np.searchsorted(
            np.cumsum(cells.sizes), np.arange(1, parts) * cells.sizes.sum() / parts, side="right"
        )
        bounds = np.unique(np.r_[0, np.minimum(cuts, cells.nlist), cells.nlist])
    shards: list[VectorShard] = []
    for n, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
        owned = np.arange(lo, hi, dtype=np.int64)
        owned = owned[cells.sizes[owned] > 0]
        ids_parts = [cell_ids[c] for c in owned.tolist()]
        offsets = np.r_[0, np.cumsum([len(p) for p in ids_parts])].astype(np.int64)
        shards.append(
            VectorShard(
                "cells",
                n,
                specs[n] if parents is not None else None,
                owned,
                offsets,
                np.concatenate(ids_parts) if ids_parts else np.empty(0, np.int64),
                parent[owned] if parents is not None else None,
                (
                    np.concatenate([cells.get(c)[1] for c in owned.tolist()])
                    if parents is None and len(owned)
                    else None
                ),
            )
        )
    return replace(
        plan_out, shards=shards, lookup=cell_lookup(cells), bounds=np.asarray(bounds, np.int64)
    )


def merge_exact(answers: Sequence[ShardAnswer], k: int) -> tuple[Neighbours, JoinReport]:
    """The exhaustive join's table from its shards' (each query's best ``k`` of the best ``k``)."""
    tables = [a.table for a in answers]
    keys = np.unique(np.concatenate([t.keys for t in tables]))
    q = np.concatenate([np.repeat(t.keys, np.diff(t.offsets)) for t in tables])
    i = np.concatenate([t.ids for t in tables])
    s = np.concatenate([np.asarray(t.scores, np.float32) for t in tables])
    table = Neighbours.from_pairs(keys, q, i, s, k=k, descending=True)
    return table, JoinReport("exact", pairs=table.pairs)


def value_parts(queries: npt.NDArray[np.uint64], parts: int) -> list[npt.NDArray[np.uint64]]:
    """The distinct query values in ``parts`` ranges of their table keys (``as_keys`` order)."""
    values = np.unique(np.asarray(queries, np.uint64))
    values = values[np.argsort(as_keys(values), kind="stable")]
    return [p for p in np.array_split(values, max(1, parts)) if len(p)] or [values]


def concat_rows(tables: Sequence[Neighbours]) -> Neighbours:
    """Tables of consecutive key ranges (``value_parts``) as one table."""
    keys = np.concatenate([t.keys for t in tables])
    if len(keys) > 1 and not (np.diff(keys) > 0).all():
        raise ValueError("the shards' key ranges overlap or are out of order")
    sizes = np.concatenate([np.diff(t.offsets) for t in tables])
    offsets = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return Neighbours(
        keys,
        offsets,
        np.concatenate([t.ids for t in tables]),
        np.concatenate([t.scores for t in tables]),
    )


class ShardedSelfJoins(LocalSelfJoins):
    """The self-joins cut into ``parts`` shards, run by ``call`` and merged here.

    ``call(method, args)`` runs ``JoinShard.method(*args[n])`` on shard ``n`` for every ``n``
    and returns the answers in order (Ray actors, or ``JoinShard`` objects in one process).
    ``folder``: where the driver's float index is saved (the shards map its bytes).
    """

    def __init__(
        self, call: ShardCall, parts: int, folder: Path, submit: ShardSubmit | None = None
    ) -> None:
        super().__init__()
        self.call, self.parts, self.folder = call, max(1, parts), folder
        # submit(method, args) -> a function waiting for the answers: the next batch's coarse
        # step runs while the shards score this one (default: ``call`` at once)
        self.submit: ShardSubmit = submit or (lambda method, args: _ready(call(method, args)))
        self.mapped: list[int] = []  # bytes of the float index each vector shard mapped

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
        """``LocalSelfJoins.hash_tables``, the values cut among the shards: where the k-NN is a
        multi-index join each shard answers both tables of its values from it; else the
        radius join stays here (one self-join of the store) and the k-NN is cut."""
        parts = value_parts(queries, self.parts)
        whole = sum(len(p) for p in parts)
        shared = whole * store.count > hamming_join.BRUTE_PAIRS and radius <= min(
            max_radius, MAX_EXACT_RADIUS
        )
        if not shared:
            within = self.hash_radius(store, queries, radius, mirror=mirror)
            return within, self.hash_knn(store, queries, k, max_radius, mirror=mirror)
        answers = self.call("hash_tables", [(p, radius, k, max_radius, mirror) for p in parts])
        return concat_rows([a[0] for a in answers]), concat_rows([a[1] for a in answers])

    def hash_knn(
        self,
        store: BinaryStore,
        queries: npt.NDArray[np.uint64],
        k: int,
        max_radius: int,
        *,
        mirror: int | None = None,
    ) -> Neighbours:
        """``HammingJoin.knn`` of ``queries``, the values cut among the shards.

        (The radius join stays here, inherited: when the queries are the stored hashes it is
        one self-join of the store, each pair checked once, which values cut in parts would
        turn back into a search per value: 1.4x its CPU for two parts at 1M.)"""
        parts = value_parts(queries, self.parts)
        whole = sum(len(p) for p in parts)
        return concat_rows(
            self.call("hash_knn", [(p, k, max_radius, whole, mirror) for p in parts])
        )

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
        """``vector_join.self_join`` of the corpus's batches, cut among the shards: the
        exhaustive join shard by shard, or the cell join batch by batch (the coarse step
        here, each shard scoring the probes of its cells)."""
        if store.count == 0:
            return super().vectors(store, corpus_dir, refs, k=k, floor=floor, cosine=cosine)
        plan = plan_vector_join(store, self.folder, self.parts, k=k, floor=floor, cosine=cosine)
        if plan.cells is None:
            answers: list[ShardAnswer] = self.call(
                "exact_shard", [(shard, corpus_dir, list(refs), k, floor) for shard in plan.shards]
            )
            self.mapped = [a.mapped for a in answers]
            return merge_exact(answers, k)
        probes = None
        if plan.regroup is not None and plan.cells is not None:
            # the coarse pass first, the cells regrouped by it, then the shards cut from them
            cpu = time.process_time()
            regrouped, probes = voronoi_probes(
                plan.regroup,
                iter_chunks(corpus_dir, list(refs)),
                plan.cells.gap,
                plan.cells.cap,
            )
            plan.regroup = None
            plan.cells = replace(plan.cells, sizes=regrouped.sizes, source=regrouped.source)
            plan = cell_shards(plan, regrouped, self.parts)
            plan.cpu_s["coarse_pass"] = time.process_time() - cpu
        self.mapped = self.call("open_cells", [(plan.cells, shard) for shard in plan.shards])
        try:
            return self._cell_join(plan, iter_chunks(corpus_dir, list(refs)), probes)
        finally:
            self.call("close_cells", [(shard.shard,) for shard in plan.shards])

    def _cell_join(
        self, plan: VectorPlan, queries: vector_join.Chunks, chosen: Probes | None = None
    ) -> tuple[Neighbours, JoinReport]:
        """``vector_join.ivf_join`` with each batch's scoring done by the shards (``chosen``:
        each batch's, already chosen by ``voronoi_probes``)."""
        cells, lookup, bounds = plan.cells, plan.lookup, plan.bounds
        assert cells is not None and lookup is not None and bounds is not None
        out, keys = JoinPairs(), []
        probes = scored = 0
        cpu = time.process_time()
        waiting: tuple[npt.NDArray[np.int64], Callable[[], list[Any]]] | None = None
        for n, (qids, q) in enumerate(rebatch(queries, vector_join.QUERY_BATCH)):
            keys.append(qids)
            if chosen is not None:
                rows, by_cell = chosen[n][0].astype(np.int64), chosen[n][1].astype(np.int64)
            else:
                rows, by_cell = probe_cells(
                    q, cells.centroids, cells.gap, cells.cap, lookup(qids), cells.graph
                )
            probes += len(by_cell)
            scored += int(cells.sizes[by_cell].sum())
            cut = np.searchsorted(by_cell, bounds)
            args = [
                (shard.shard, q, rows[a:b], by_cell[a:b], cells.k, cells.floor)
                for shard, a, b in zip(plan.shards, cut[:-1], cut[1:], strict=True)
            ]
            answers = self.submit("cell_pairs", args)
            if waiting is not None:
                _add_pairs(out, *waiting)
            waiting = (qids, answers)
        if waiting is not None:
            _add_pairs(out, *waiting)
        table = out.table(keys, cells.k, symmetric=True)
        queried = max(1, len(table.keys))
        return table, JoinReport(
            "ivf",
            nlist=len(cells.centroids),
            nprobe=cells.cap,
            gap=round(cells.gap, 5),
            probes_per_item=round(probes / queried, 1),
            scored_per_item=round(scored / queried),
            cosine=plan.cosine,
            recall=plan.recall,
            recall_at_floor=plan.at_floor,
            coarse=plan.coarse,
            voronoi=chosen is not None,
            pairs=table.pairs,
            cpu_s={
                **{n: round(v, 2) for n, v in plan.cpu_s.items()},
                "join_driver": round(time.process_time() - cpu, 2),
            },
        )


def _ready(answers: list[Any]) -> Callable[[], list[Any]]:
    return lambda: answers


def _add_pairs(
    out: JoinPairs, qids: npt.NDArray[np.int64], answers: Callable[[], list[Any]]
) -> None:
    """One batch's pairs, shard by shard: the local join's cell order, so the same pairs in
    the same order (batches are added in order too)."""
    for r, i, s in answers():
        out.add(qids[r], i, s)
