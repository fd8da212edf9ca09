"""Vector self-join of a corpus: each item's ``k`` nearest items at or above a cosine floor.

Dedup needs, for every corpus item, the neighbours an audit's k-NN would nominate — but only
those at or above the lowest cosine any tier uses (``floor``); the engine drops the rest. That
makes the question a *range* join, which an inverted file answers cell by cell:

* up to ``EXACT_JOIN_MAX`` vectors: exact, blocks of queries against every vector (BLAS), the
  same-run brute-force baseline;
* beyond: the corpus is cut into cells (the IVF store's own lists, or a k-means partition of a
  Flat store's vectors) and every item is scored against the items of its ``nprobe`` nearest
  cells only, one BLAS product per cell and query batch. ``nprobe`` is *measured*
  (``calibrate_nprobe``): the smallest that finds ``JOIN_RECALL`` of pairs at the calibration
  cosine — synthetic pairs built at exactly that cosine from sampled items, found when either
  item's probes reach the other's cell (the join looks both ways). Pairs closer than that are
  found at least as often. Cost: ``n * nprobe * n / nlist`` products, linear for a fixed
  ``nprobe / nlist``. An index's own lists grow as ~sqrt(n) (1,000 vectors each at 1M), and
  the ``nprobe`` that keeps recall grows only slowly with ``nlist``, so larger cells make each
  item's work grow with the corpus: cells of more than ``JOIN_CELL`` vectors are cut
  (``split_cells``: k-means of each list's own vectors) so every item is scored against
  ``nprobe`` cells of ~``JOIN_CELL`` vectors whatever the corpus size.

The cells and the coarse step live in ``join_cells``. The coarse step scores each item against
every centroid (``n * nlist``: ~28% of the join's CPU at 1M); the two-level step
(``calibrate_width``) looks only among the cells nearest the item's own, where the calibration
pairs say that finds what the full step finds. On the bench's uniform 64-d vectors it never
does (a cell's nearest centroids are not where its items' pairs are: 1M, 2,329 cells, 256
nearest: 0.70 of the pairs), so the full step runs there; the rest of the join's CPU at 1M is
the products with the cells (~50%), gathering the probing rows (~11%) and ``_above`` (~11%).

Cut cells keep each sub-cell inside its list, so an item near a list's border sits in a
sub-cell whose centroid is not its nearest (27.7% of 1M uniform 64-d vectors), and the probing
that finds its pairs must reach further. Where the full coarse step runs, the decoded vectors
fit ``DECODE_CACHE_BYTES`` and the calibration sample says it saves probes
(``choose_voronoi``), the join runs its coarse step first over every batch
(``voronoi_probes``: the step scores every centroid anyway, so each item's nearest comes free),
regroups the items into the Voronoi cells of the same centroids (``voronoi_cells``), with the
gap calibrated for those (``as_voronoi``), and then scores the held probes: on the bench's 1M
uniform 64-d vectors (IVF1024 lists cut in 2-3) 14.1 -> 10.4 cells probed per item, 6,043 ->
4,468 vectors scored; at 3M (lists cut in 4) the sample predicts no saving and the cut cells
are joined as they are.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.cpus import usable_cpus
from splitaudit.indexer.store.exact import ordered_map
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_mih import sorted_unique
from splitaudit.indexer.store.join_calibrate import (
    PairScores,
    as_voronoi,
    calibrate_gap,
    calibrate_width,
    gap_recall,
    pair_scores,
    probes_per_item,
)
from splitaudit.indexer.store.join_cells import (
    DECODE_CACHE_BYTES,
    Cells,
    cell_lookup,
    ivf_cells,
    kmeans_cells,
    nearest_cells,
    probe_cells,
    split_cells,
    voronoi_cells,
)
from splitaudit.indexer.store.neighbours import Neighbours

log = logging.getLogger(__name__)
EXACT_JOIN_MAX = 50_000  # vectors joined exhaustively; beyond, cell by cell
QUERY_BATCH = 65_536
_EXACT_BLOCK = 2_048
# Cut cells regrouped into the Voronoi cells of their centroids (``voronoi_cells``) where the
# full coarse step runs, the decoded vectors fit ``DECODE_CACHE_BYTES`` and the calibration
# sample says the regrouped cells need at most ``VORONOI_GAIN`` of the probes (1M uniform 64-d
# items in IVF1024 lists cut in 2-3: 0.74 of them; 3M in IVF2048 lists cut in 4: 0.98)
VORONOI = True
VORONOI_GAIN = 0.9
# Query batches are scored on this many threads at once (None: every usable CPU), each product
# on one BLAS thread as before, so the scores are the same bits whatever the count; the
# batches in flight (threads + 1) are bounded by ``IN_FLIGHT_BYTES`` of query vectors
JOIN_THREADS: int | None = None
IN_FLIGHT_BYTES = 1 << 30

Chunks = Iterable[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
Probes = list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]]  # per batch: (rows, cells)


@dataclass(frozen=True)
class JoinReport:
    """How a vector join ran: method, cells, probes and the recall measured for them."""

    method: str
    nlist: int = 0
    nprobe: int = 0  # the most cells one item probes (adaptive probing: see ``gap``)
    gap: float | None = None
    probes_per_item: float | None = None  # cells probed, on average
    scored_per_item: int | None = None  # vectors scored, on average
    cosine: float | None = None
    recall: float | None = None
    recall_at_floor: float | None = None
    coarse: dict[str, Any] | None = None  # the two-level coarse step (``CoarseCalibration``)
    voronoi: bool | None = None  # cut cells regrouped by nearest centroid (``voronoi_cells``)
    pairs: int = 0
    cpu_s: dict[str, float] | None = None  # per step: cells (k-means, split), calibrate, join

    def to_dict(self) -> dict[str, object]:
        """Plain values for logs and bench output."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


def rebatch(
    chunks: Chunks, rows: int
) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
    """The (ids, vectors) ``chunks`` joined into blocks of at least ``rows`` rows (the last one
    whatever is left), in order: the joins' query batches."""
    ids_parts: list[npt.NDArray[np.int64]] = []
    vec_parts: list[npt.NDArray[np.float32]] = []
    held = 0
    for ids, vecs in chunks:
        ids_parts.append(np.asarray(ids, np.int64))
        vec_parts.append(np.asarray(vecs, np.float32))
        held += len(ids)
        if held >= rows:
            yield np.concatenate(ids_parts), np.concatenate(vec_parts)
            ids_parts, vec_parts, held = [], [], 0
    if held:
        yield np.concatenate(ids_parts), np.concatenate(vec_parts)


def _above(
    scores: npt.NDArray[np.float32], floor: float, k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, column) of the scores >= ``floor``, at most the best ``k`` per row."""
    # flat positions, then divmod: ~10x faster than a 2-D np.nonzero over the whole block
    hits = np.flatnonzero(scores >= floor)
    if scores.shape[1] > k and len(hits) > 2 * k * len(scores):
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # dense block: top-k first
        top = np.take_along_axis(scores, part, 1)
        r, c = np.nonzero(top >= floor)
        return r.astype(np.int64), part[r, c].astype(np.int64)
    r, c = np.divmod(hits, scores.shape[1])
    return r.astype(np.int64), c.astype(np.int64)


class JoinPairs:
    """(query id, neighbour id, cosine) triples collected for one table."""

    def __init__(self) -> None:
        self.q: list[npt.NDArray[np.int64]] = []
        self.i: list[npt.NDArray[np.int64]] = []
        self.s: list[npt.NDArray[np.float32]] = []

    def add(
        self, q: npt.NDArray[np.int64], i: npt.NDArray[np.int64], s: npt.NDArray[np.float32]
    ) -> None:
        self.q.append(q)
        self.i.append(i)
        self.s.append(s.astype(np.float32))

    def table(
        self, keys: list[npt.NDArray[np.int64]], k: int, *, symmetric: bool = False
    ) -> Neighbours:
        """The top-``k`` table; ``symmetric``: a pair found one way counts both ways (when
        both items are queries), as a cell join finds it when either item probes the other's cell.
        """

        def cat(parts: list[Any], dtype: type) -> Any:
            return np.concatenate(parts) if parts else np.empty(0, dtype)

        all_keys = sorted_unique(cat(keys, np.int64))
        q, i, s = cat(self.q, np.int64), cat(self.i, np.int64), cat(self.s, np.float32)
        if symmetric and len(q):
            back = np.isin(i, all_keys) & (i != q)
            q, i, s = np.r_[q, i[back]], np.r_[i, q[back]], np.r_[s, s[back]]
            if min(q.min(), i.min()) >= 0 and max(q.max(), i.max()) < 2**31:
                # one int64 key per pair: ~5x faster than np.unique over a 2-row stack
                _, first = np.unique(q * 2**31 + i, return_index=True)
            else:
                _, first = np.unique(np.stack([q, i]), axis=1, return_index=True)
            q, i, s = q[first], i[first], s[first]
        return Neighbours.from_pairs(all_keys, q, i, s, k=k, descending=True)


def exact_join(
    base_ids: npt.NDArray[np.int64],
    base: npt.NDArray[np.float32],
    queries: Chunks,
    *,
    k: int,
    floor: float,
) -> Neighbours:
    """Each query's ``k`` best ``base`` rows with cosine >= ``floor``, exhaustively.

    The products run on one BLAS thread: how OpenBLAS cuts a product among its threads can
    change a score's last bits on some CPUs (seen on an AMD EPYC: 27 of 1,645 dedup edges of a
    20k corpus differed between the driver's two threads and a Ray actor's one), and the
    sharded join (``dedup.sharded_join``, one block per actor) must give the same scores."""
    out, keys = JoinPairs(), []
    with threadpool_limits(limits=1, user_api="blas"):
        for qids, q in rebatch(queries, _EXACT_BLOCK):
            keys.append(qids)
            for bs in range(0, len(base), 16_384):
                scores = q @ np.asarray(base[bs : bs + 16_384], np.float32).T
                r, c = _above(scores, floor, k)
                out.add(qids[r], base_ids[bs + c], scores[r, c])
    return out.table(keys, k)


def ivf_join(
    cells: Cells,
    queries: Chunks,
    *,
    k: int,
    floor: float,
    nprobe: int,
    gap: float | None = None,
    progress: Callable[[int], None] | None = None,
    stats: dict[str, int] | None = None,
    own: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None = None,
    graph: npt.NDArray[np.int64] | None = None,
    probes: Probes | None = None,
) -> Neighbours:
    """Each query's ``k`` best vectors with cosine >= ``floor`` among its ``nprobe`` nearest
    cells; with ``gap``, only those of them scoring within ``gap`` of its nearest one
    (``calibrate_gap``). ``stats``: adds the cells probed (``probes``) and vectors scored
    (``scored``). ``own`` (``cell_lookup``): each query also probes the cell it is in (a
    split list's sub-cell is not always its nearest centroid's), so it finds itself and
    whatever shares its cell. ``graph`` (with ``gap`` and ``own``): the two-level coarse step,
    each query's cells chosen among its own cell's neighbours (``calibrate_width``).
    ``probes``: each batch's probes, already chosen (``voronoi_probes``)."""

    def batch(
        job: tuple[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]],
    ) -> tuple[npt.NDArray[np.int64], int, int, Any, Any, Any]:
        n, (qids, q) = job
        mine = own(qids) if own is not None and probes is None else None
        if probes is not None:
            rows, coarse = probes[n][0].astype(np.int64), probes[n][1].astype(np.int64)
        elif gap is not None:
            rows, coarse = probe_cells(q, cells.centroids, gap, nprobe, mine, graph)
        else:
            _scores, coarse = nearest_cells(q, cells.centroids, nprobe)
            rows = np.repeat(np.arange(len(q)), coarse.shape[1])
            coarse = coarse.ravel()
            if mine is not None:
                inside = np.flatnonzero(mine >= 0)
                pairs = np.unique(
                    np.r_[rows * cells.nlist + coarse, inside * cells.nlist + mine[inside]]
                )
                rows, coarse = pairs // cells.nlist, pairs % cells.nlist
            order = np.argsort(coarse, kind="stable")
            rows, coarse = rows[order], coarse[order]
        scored = int(cells.sizes[coarse].sum())
        return qids, len(coarse), scored, *score_cells(cells, q, rows, coarse, k=k, floor=floor)

    out, keys = JoinPairs(), []
    done = 0
    work = enumerate(rebatch(queries, QUERY_BATCH))
    with threadpool_limits(limits=1):  # every library: the threads' own limits nest in it
        for qids, probed, scored, r, i, scores in ordered_map(batch, work, _threads(cells)):
            keys.append(qids)
            if stats is not None:
                stats["probes"] = stats.get("probes", 0) + probed
                stats["scored"] = stats.get("scored", 0) + scored
            out.add(qids[r], i, scores)
            done += len(qids)
            if progress is not None:
                progress(done)
    return out.table(keys, k, symmetric=True)


def voronoi_probes(cells: Cells, queries: Chunks, gap: float, cap: int) -> tuple[Cells, Probes]:
    """The cell join's coarse pass on its own, over every batch (``ivf_join``'s batches):
    each batch's probes (the cells within ``gap`` of the best, at most ``cap``, as
    ``probe_cells`` orders them) and the cells regrouped by each item's best cell
    (``voronoi_cells``), which ``ivf_join(..., probes=)`` then scores. The coarse step scores
    every centroid anyway, so the regrouping costs no product; the probes are held meanwhile
    (~8 bytes each, ~12 per item on uniform 64-d vectors)."""

    def batch(
        job: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], tuple[Any, Any]]:
        qids, q = job
        best = np.empty(len(q), np.int64)
        rows, coarse = probe_cells(q, cells.centroids, gap, cap, None, best=best)
        return np.asarray(qids, np.int64), best, (rows.astype(np.int32), coarse.astype(np.int32))

    probes: Probes = []
    id_parts: list[npt.NDArray[np.int64]] = []
    best_parts: list[npt.NDArray[np.int64]] = []
    with threadpool_limits(limits=1):  # every library: the threads' own limits nest in it
        for qids, best, held in ordered_map(batch, rebatch(queries, QUERY_BATCH), _threads(cells)):
            probes.append(held)
            id_parts.append(qids)
            best_parts.append(best)
    ids = np.concatenate(id_parts) if id_parts else np.empty(0, np.int64)
    best = np.concatenate(best_parts) if best_parts else np.empty(0, np.int64)
    return voronoi_cells(cells, ids, best), probes


def _threads(cells: Cells) -> int:
    """Threads for the join's query batches: ``JOIN_THREADS`` (every usable CPU by default),
    at most as many as keep the batches in flight within ``IN_FLIGHT_BYTES``."""
    wanted = JOIN_THREADS if JOIN_THREADS is not None else usable_cpus()
    batch_bytes = QUERY_BATCH * max(1, cells.centroids.shape[1]) * 4
    return max(1, min(wanted, IN_FLIGHT_BYTES // batch_bytes - 1))


def use_voronoi(cells: Cells, parents: int, graph: npt.NDArray[np.int64] | None) -> bool:
    """Whether the join regroups ``cells`` (cut from ``parents`` cells) into Voronoi cells: only
    cut cells (whole lists are Voronoi cells of the index's own centroids already), with the
    full coarse step (the two-level one needs each item's cell before its coarse step) and
    every decoded vector fitting ``DECODE_CACHE_BYTES`` (the regrouped copy)."""
    held = int(cells.sizes.sum()) * cells.centroids.shape[1] * 4
    return VORONOI and graph is None and cells.nlist > parents and held <= DECODE_CACHE_BYTES


def choose_voronoi(
    cells: Cells,
    parents: int,
    graph: npt.NDArray[np.int64] | None,
    cosine: float,
    calibration: PairScores,
    calibrated: tuple[float, int, float],
) -> tuple[bool, float, int, float]:
    """Whether the join regroups ``cells`` (``use_voronoi``, and the calibration sample's
    probes per item at most ``VORONOI_GAIN`` of the cut cells'), with the ``(gap, cap,
    recall)`` calibrated for the cells it will score (``calibrated``: the cut cells')."""
    if not use_voronoi(cells, parents, graph):
        return (False, *calibrated)
    regrouped = as_voronoi(calibration)
    gap, cap, recall = calibrate_gap(cells, cosine, scores=regrouped)
    if probes_per_item(regrouped, gap) > VORONOI_GAIN * probes_per_item(calibration, calibrated[0]):
        return (False, *calibrated)
    return True, gap, cap, recall


def score_cells(
    cells: Cells,
    q: npt.NDArray[np.float32],
    rows: npt.NDArray[np.int64],
    probed: npt.NDArray[np.int64],
    *,
    k: int,
    floor: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The cell join's scoring of query rows ``rows`` against the cells ``probed`` they probe
    (both sorted by cell, rows ascending within a cell): one product per cell and the pairs
    ``_above`` keeps, in cell order, as (query row, neighbour id, cosine). ``ivf_join`` runs it
    on a whole batch; a shard of the join (``dedup.sharded_join``) on the probes of its cells."""
    out_r: list[npt.NDArray[np.int64]] = []
    out_i: list[npt.NDArray[np.int64]] = []
    out_s: list[npt.NDArray[np.float32]] = []
    starts = np.flatnonzero(np.r_[True, probed[1:] != probed[:-1]]) if len(probed) else probed
    bounds = np.r_[starts, len(probed)]
    # ~nlist products per batch: BLAS's own threads only slow small ones (float_index), and one
    # thread gives the same scores wherever the products run (bit-identical shards)
    with threadpool_limits(limits=1, user_api="blas"):
        for j, start in enumerate(starts.tolist()):
            ids, vecs = cells.get(int(probed[start]))
            if len(ids) == 0:
                continue
            qrows = rows[start : bounds[j + 1]]
            scores = q[qrows] @ vecs.T
            r, c = _above(scores, floor, k)
            out_r.append(qrows[r])
            out_i.append(ids[c])
            out_s.append(scores[r, c].astype(np.float32))
    if not out_r:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32)
    return np.concatenate(out_r), np.concatenate(out_i), np.concatenate(out_s)


def self_join(
    store: FloatStore,
    queries: Callable[[], Chunks],
    *,
    k: int,
    floor: float,
    cosine: float,
    exact_max: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[Neighbours, JoinReport]:
    """Each query item's ``k`` nearest corpus items at cosine >= ``floor`` (itself included).

    ``queries()`` streams the (ids, vectors) to join — the corpus's own vector batches.
    ``cosine`` is where ``nprobe`` is calibrated (pairs closer are found more often).
    """
    if store.count == 0:
        return Neighbours.from_pairs(
            np.empty(0, np.int64),
            np.empty(0, np.int64),
            np.empty(0, np.int64),
            np.empty(0, np.float32),
            k=k,
            descending=True,
        ), JoinReport("empty")
    exact_max = EXACT_JOIN_MAX if exact_max is None else exact_max
    if store.is_exact and store.count <= exact_max:
        base, ids = store.vectors_view()
        table = exact_join(ids, base, queries(), k=k, floor=floor)
        return table, JoinReport("exact", pairs=table.pairs)
    cpu = {"cells": -time.process_time()}
    if store.is_exact:
        from splitaudit.indexer.store.policy import IndexPolicy

        base, ids = store.vectors_view()
        cells = kmeans_cells(ids.copy(), base, IndexPolicy().nlist_for(store.count))
    else:
        cells = ivf_cells(store)
    parents = cells.nlist
    cells = split_cells(cells)
    cpu["calibrate"] = -time.process_time()
    cpu["cells"] -= cpu["calibrate"]
    calibration = pair_scores(cells, cosine)
    gap, nprobe, recall = calibrate_gap(cells, cosine, scores=calibration)
    graph, coarse = calibrate_width(cells, cosine, gap, scores=calibration)
    voronoi, gap, nprobe, recall = choose_voronoi(
        cells, parents, graph, cosine, calibration, (gap, nprobe, recall)
    )
    at_floor = gap_recall(cells, floor, gap, voronoi=voronoi)
    cpu["join"] = -time.process_time()
    cpu["calibrate"] -= cpu["join"]
    log.info(
        "vector self-join over %s%s: cells within %.4f of the nearest, at most %d of %d, "
        "among the %s nearest each item's own (recall %.4f at cosine %.2f, %.4f at %.2f)",
        cells.source,
        " (Voronoi)" if voronoi else "",
        gap,
        nprobe,
        cells.nlist,
        coarse.width or "all",
        recall,
        cosine,
        at_floor,
        floor,
    )
    work: dict[str, int] = {}
    probes = None
    if voronoi:
        cells, probes = voronoi_probes(cells, queries(), gap, nprobe)
    table = ivf_join(
        cells,
        queries(),
        k=k,
        floor=floor,
        nprobe=nprobe,
        gap=gap,
        progress=progress,
        stats=work,
        own=cell_lookup(cells) if probes is None else None,
        graph=graph,
        probes=probes,
    )
    queried = max(1, len(table.keys))
    cpu["join"] += time.process_time()
    return table, JoinReport(
        "ivf",
        nlist=cells.nlist,
        nprobe=nprobe,
        gap=round(gap, 5),
        probes_per_item=round(work.get("probes", 0) / queried, 1),
        scored_per_item=round(work.get("scored", 0) / queried),
        cosine=cosine,
        recall=round(recall, 5),
        recall_at_floor=round(at_floor, 5),
        coarse=coarse.to_dict(),
        voronoi=voronoi,
        pairs=table.pairs,
        cpu_s={step: round(t, 3) for step, t in cpu.items()},
    )
