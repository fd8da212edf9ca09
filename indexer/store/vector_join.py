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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.store.float_build import spherical_kmeans
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_mih import sorted_unique
from splitaudit.indexer.store.neighbours import Neighbours

log = logging.getLogger(__name__)
EXACT_JOIN_MAX = 50_000  # vectors joined exhaustively; beyond, cell by cell
JOIN_RECALL = 0.999  # of pairs at the calibration cosine
CALIBRATION_PAIRS = 4_000
QUERY_BATCH = 65_536
DECODE_CACHE_BYTES = 1 << 30  # decoded IVF lists kept across query batches up to this size
_EXACT_BLOCK = 2_048
JOIN_CELL = 400  # target vectors per join cell (``split_cells``)
_COARSE_BLOCK = 512  # query rows scored against every centroid at once (``cells_within``)

Chunks = Iterable[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]


@dataclass
class Cells:
    """A partition of the corpus vectors: centroids, and each cell's (ids, float32 vectors)."""

    centroids: npt.NDArray[np.float32]
    sizes: npt.NDArray[np.int64]
    fetch: Callable[[int], tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
    source: str
    _cache: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = field(
        default_factory=dict
    )
    cache_limit: int = DECODE_CACHE_BYTES

    @property
    def nlist(self) -> int:
        """Number of cells."""
        return len(self.centroids)

    def drop(self, cell: int) -> None:
        """Forget one cell's decoded vectors (a caller that keeps its own copy)."""
        self._cache.pop(cell, None)

    def get(self, cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ids and vectors of one cell (decoded once while the cache allows)."""
        hit = self._cache.get(cell)
        if hit is not None:
            return hit
        ids, vecs = self.fetch(cell)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        held = int(self.sizes.sum()) * self.centroids.shape[1] * 4
        if held <= self.cache_limit:
            self._cache[cell] = (ids, vecs)
        return ids, vecs


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
    pairs: int = 0
    cpu_s: dict[str, float] | None = None  # per step: cells (k-means, split), calibrate, join

    def to_dict(self) -> dict[str, object]:
        """Plain values for logs and bench output."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


def ivf_cells(store: FloatStore) -> Cells:
    """An IVF store's inverted lists as cells (codes decoded to float32 on demand)."""
    nlist = int(store.index.nlist)
    invlists = store.index.invlists
    sizes = np.array([int(invlists.list_size(c)) for c in range(nlist)], np.int64)
    return Cells(store.centroids(), sizes, store.list_vectors, source=store.index_type)


def kmeans_cells(
    ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32], nlist: int, seed: int = 0
) -> Cells:
    """A spherical k-means partition of ``vectors`` (a Flat store's), for the cell-by-cell join."""
    rng = np.random.default_rng(seed)
    train = vectors[np.sort(rng.choice(len(vectors), min(len(vectors), 40 * nlist), replace=False))]
    centroids = spherical_kmeans(np.ascontiguousarray(train), nlist, iters=10, rng=rng)
    assign = np.concatenate(
        [
            np.argmax(vectors[s : s + 8192] @ centroids.T, axis=1)
            for s in range(0, len(vectors), 8192)
        ]
    )
    order = np.argsort(assign, kind="stable")
    sizes = np.bincount(assign, minlength=nlist).astype(np.int64)
    bounds = np.r_[0, np.cumsum(sizes)]
    if vectors.nbytes > DECODE_CACHE_BYTES:  # too large to copy: each cell gathered per batch

        def fetch(cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
            rows = order[bounds[cell] : bounds[cell + 1]]
            return ids[rows], vectors[rows]

        return Cells(centroids, sizes, fetch, source=f"kmeans{nlist}", cache_limit=0)
    # one copy in cell order: each cell is a slice of it, read as it is by every query batch
    cell_ids, cell_vecs = ids[order], np.ascontiguousarray(vectors[order], dtype=np.float32)

    def fetch_slice(cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        return cell_ids[bounds[cell] : bounds[cell + 1]], cell_vecs[bounds[cell] : bounds[cell + 1]]

    return Cells(centroids, sizes, fetch_slice, source=f"kmeans{nlist}", cache_limit=0)


def split_cells(cells: Cells, target: int = JOIN_CELL, seed: int = 0) -> Cells:
    """``cells`` with each cell of more than ~1.5 ``target`` vectors cut into ``size / target``
    sub-cells (spherical k-means of its own vectors, 5 iterations); unchanged when the cells
    are already that small. A sub-cell is its parent's rows: the parent is decoded (or read
    from its cache) when a sub-cell is fetched, so memory stays that of ``cells``."""
    if not cells.nlist or cells.sizes.sum() <= 1.5 * target * cells.nlist:
        return cells
    rng = np.random.default_rng(seed)
    centroids: list[npt.NDArray[np.float32]] = []
    members: list[tuple[int, npt.NDArray[np.int64]]] = []  # (parent cell, its rows)
    # while the parent cells' vectors fit their cache, a cut cell's sub-cells are kept as
    # contiguous copies instead (the parent's cache entry dropped): each query batch then
    # reads them as they are, not gathered from the parent again (16 batches at 1M)
    keep = int(cells.sizes.sum()) * cells.centroids.shape[1] * 4 <= cells.cache_limit
    kept: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
    for cell in range(cells.nlist):
        size = int(cells.sizes[cell])
        parts = max(1, round(size / target))
        if parts == 1:
            centroids.append(cells.centroids[cell][None])
            members.append((cell, np.arange(size, dtype=np.int64)))
            continue
        ids, vecs = cells.get(cell)
        sub = spherical_kmeans(np.ascontiguousarray(vecs), parts, iters=5, rng=rng)
        assign = np.argmax(vecs @ sub.T, axis=1)
        for j in range(parts):
            rows = np.flatnonzero(assign == j)
            if len(rows):
                if keep:
                    kept[len(members)] = (ids[rows], np.ascontiguousarray(vecs[rows]))
                centroids.append(sub[j][None])
                members.append((cell, rows.astype(np.int64)))
        if keep:
            cells.drop(cell)
    last: list[Any] = [None, None]  # the parent fetched last (sub-cells are probed in order)

    def fetch(sub_cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        hit = kept.get(sub_cell)
        if hit is not None:
            return hit
        parent, rows = members[sub_cell]
        if last[0] != parent:
            last[0], last[1] = parent, cells.get(parent)
        ids, vecs = last[1]
        if len(rows) == len(ids):  # a cell left whole: no copy
            return ids, vecs
        return ids[rows], vecs[rows]

    return Cells(
        np.ascontiguousarray(np.concatenate(centroids), dtype=np.float32),
        np.array([len(rows) for _p, rows in members], np.int64),
        fetch,
        source=f"{cells.source}/{len(members)}",
        cache_limit=0,
    )


def nearest_cells(
    q: npt.NDArray[np.float32], centroids: npt.NDArray[np.float32], nprobe: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The ``nprobe`` cells nearest each query row and their scores, best first (FAISS's flat
    search: ~3x less CPU than a numpy argpartition of the score matrix; on one thread, BLAS
    and OpenMP: 1.0 CPU-s against 1.5 on two busy cores for 65,536 queries x 2,329 cells)."""
    import faiss

    nprobe = min(nprobe, len(centroids))
    quantizer = faiss.IndexFlatIP(centroids.shape[1])
    quantizer.add(np.ascontiguousarray(centroids, dtype=np.float32))
    with threadpool_limits(limits=1):
        scores, cells = quantizer.search(np.ascontiguousarray(q, dtype=np.float32), nprobe)
    return scores, cells.astype(np.int64)


def cells_within(
    q: npt.NDArray[np.float32],
    centroids: npt.NDArray[np.float32],
    gap: float,
    cap: int,
    own: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(row, cell)`` of every cell whose centroid scores within ``gap`` of the row's best one
    (at most ``cap`` per row: the best), rows ascending; ``own``: each row's own cell (-1:
    none), added where missing. Blocks of ``_COARSE_BLOCK`` rows keep
    the score matrix cache-sized: 2.5x less CPU than FAISS's flat top-``cap`` search (65,536
    queries x 2,329 cells: 0.57 CPU-s against 1.41 for a top-110)."""
    rows_l: list[npt.NDArray[np.int64]] = []
    cells_l: list[npt.NDArray[np.int64]] = []
    with threadpool_limits(limits=1, user_api="blas"):
        for s in range(0, len(q), _COARSE_BLOCK):
            scores = q[s : s + _COARSE_BLOCK] @ centroids.T
            keep = scores >= (scores.max(axis=1) - gap)[:, None]
            over = np.flatnonzero(np.count_nonzero(keep, axis=1) > cap)
            if len(over):  # rare: a row with more than cap cells within the gap keeps its best
                top = np.argpartition(-scores[over], cap - 1, axis=1)[:, :cap]
                keep[over] = False
                keep[over[:, None], top] = True
            if own is not None:
                mine = own[s : s + _COARSE_BLOCK]
                inside = np.flatnonzero(mine >= 0)
                keep[inside, mine[inside]] = True
            # flat positions, then divmod: ~5x less CPU than a 2-D np.nonzero (same order)
            r, c = np.divmod(np.flatnonzero(keep), keep.shape[1])
            rows_l.append(r + s)
            cells_l.append(c)
    if not rows_l:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(rows_l), np.concatenate(cells_l)


def cell_lookup(cells: Cells) -> Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]:
    """A function from item ids to the cell each is in (-1 for an id in no cell)."""
    parts = [cells.get(c)[0] for c in range(cells.nlist)]
    ids = np.concatenate(parts) if parts else np.empty(0, np.int64)
    of = np.repeat(np.arange(cells.nlist, dtype=np.int64), [len(p) for p in parts])
    order = np.argsort(ids, kind="stable")
    ids, of = ids[order], of[order]

    def lookup(wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        if not len(ids):
            return np.full(len(wanted), -1, np.int64)
        pos = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
        return np.where(ids[pos] == wanted, of[pos], -1)

    return lookup


def pair_scores(
    cells: Cells, cosine: float, *, pairs: int = CALIBRATION_PAIRS, seed: int = 0
) -> tuple[
    npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """Centroid scores of synthetic pairs at exactly ``cosine``: ``(sq, sv, cell_v, cell_q)``.

    Each pair is a sampled corpus vector ``v`` (in cell ``cell_v``) and a unit vector ``q`` at
    ``cosine`` to it (random direction, nearest cell ``cell_q``); ``sq`` and ``sv`` are their
    scores against every centroid.
    """
    rng = np.random.default_rng(seed)
    total = int(cells.sizes.sum())
    pos = np.sort(rng.choice(total, min(pairs, total), replace=False))
    bounds = np.cumsum(cells.sizes)
    cell_of = np.searchsorted(bounds, pos, side="right")
    offset = pos - np.r_[0, bounds][cell_of]
    v = np.empty((len(pos), cells.centroids.shape[1]), np.float32)
    for c in np.unique(cell_of).tolist():  # each cell decoded once
        at = np.flatnonzero(cell_of == c)
        v[at] = cells.get(int(c))[1][offset[at]]
    u = rng.standard_normal(v.shape).astype(np.float32)
    u -= (u * v).sum(axis=1, keepdims=True) * v
    u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    q = (cosine * v + np.sqrt(max(0.0, 1.0 - cosine * cosine)) * u).astype(np.float32)
    sq, sv = q @ cells.centroids.T, v @ cells.centroids.T
    return sq, sv, cell_of.astype(np.int64), np.argmax(sq, axis=1).astype(np.int64)


def pair_ranks(
    cells: Cells, cosine: float, *, pairs: int = CALIBRATION_PAIRS, seed: int = 0
) -> npt.NDArray[np.int64]:
    """For synthetic pairs at exactly ``cosine`` (``pair_scores``), the probe count each needs
    to be joined: the join finds the pair when either one's ``nprobe`` nearest cells include
    the other's cell, so the pair needs ``nprobe > rank``.
    """
    sq, sv, cell_v, cell_q = pair_scores(cells, cosine, pairs=pairs, seed=seed)
    rows = np.arange(len(sq))
    rank_q = (sq > sq[rows, cell_v][:, None]).sum(axis=1)  # v's cell among q's probes
    rank_v = (sv > sv[rows, cell_q][:, None]).sum(axis=1)  # q's cell among v's probes
    return np.minimum(rank_q, rank_v).astype(np.int64)


def calibrate_gap(
    cells: Cells, cosine: float, *, target: float = JOIN_RECALL, seed: int = 0
) -> tuple[float, int, float]:
    """Adaptive probing: the smallest centroid-score ``gap`` such that probing, for each item,
    the cells scoring within ``gap`` of its best cell joins ``target`` of the pairs at
    ``cosine``; ``(gap, cap, recall)``. ``cap`` bounds the cells any item probes (1.5x the
    most any sampled vector needed). An item deep inside its cell probes one or two cells, one
    near a border more: on 1M random 64-d vectors ~half the vectors a fixed ``nprobe`` scores
    for the same recall (docs/scale.md).
    """
    sq, sv, cell_v, cell_q = pair_scores(cells, cosine, seed=seed)
    if not len(sq):
        return 0.0, 1, 1.0
    rows = np.arange(len(sq))
    best_q, best_v = sq.max(axis=1), sv.max(axis=1)
    gaps = np.minimum(best_q - sq[rows, cell_v], best_v - sv[rows, cell_q])
    gap = float(np.quantile(gaps, target, method="higher"))
    within = np.r_[
        (sq >= best_q[:, None] - gap).sum(axis=1), (sv >= best_v[:, None] - gap).sum(axis=1)
    ]
    cap = min(cells.nlist, int(np.ceil(1.5 * within.max())))
    return gap, cap, float((gaps <= gap).mean())


def calibrate_nprobe(
    cells: Cells, cosine: float, *, target: float = JOIN_RECALL, seed: int = 0
) -> tuple[int, float]:
    """Smallest fixed ``nprobe`` joining ``target`` of the pairs at ``cosine``; (nprobe, recall)."""
    rank = pair_ranks(cells, cosine, seed=seed)
    need = int(np.quantile(rank, target, method="higher")) + 1 if len(rank) else 1
    nprobe = min(max(need, 1), cells.nlist)
    return nprobe, float((rank < nprobe).mean()) if len(rank) else 1.0


def gap_recall(cells: Cells, cosine: float, gap: float, *, seed: int = 0) -> float:
    """Share of synthetic pairs at ``cosine`` that probing within ``gap`` joins."""
    sq, sv, cell_v, cell_q = pair_scores(cells, cosine, seed=seed)
    if not len(sq):
        return 1.0
    rows = np.arange(len(sq))
    gaps = np.minimum(sq.max(axis=1) - sq[rows, cell_v], sv.max(axis=1) - sv[rows, cell_q])
    return float((gaps <= gap).mean())


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
    """Each query's ``k`` best ``base`` rows with cosine >= ``floor``, exhaustively."""
    out, keys = JoinPairs(), []
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
) -> Neighbours:
    """Each query's ``k`` best vectors with cosine >= ``floor`` among its ``nprobe`` nearest
    cells; with ``gap``, only those of them scoring within ``gap`` of its nearest one
    (``calibrate_gap``). ``stats``: adds the cells probed (``probes``) and vectors scored
    (``scored``). ``own`` (``cell_lookup``): each query also probes the cell it is in (a
    split list's sub-cell is not always its nearest centroid's), so it finds itself and
    whatever shares its cell."""
    out, keys = JoinPairs(), []
    done = 0
    for qids, q in rebatch(queries, QUERY_BATCH):
        keys.append(qids)
        mine = own(qids) if own is not None else None
        if gap is not None:
            rows, coarse = cells_within(q, cells.centroids, gap, nprobe, mine)
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
        if stats is not None:
            stats["probes"] = stats.get("probes", 0) + len(coarse)
            stats["scored"] = stats.get("scored", 0) + int(cells.sizes[coarse].sum())
        order = np.argsort(coarse, kind="stable")
        r, i, scores = score_cells(cells, q, rows[order], coarse[order], k=k, floor=floor)
        out.add(qids[r], i, scores)
        done += len(q)
        if progress is not None:
            progress(done)
    return out.table(keys, k, symmetric=True)


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
    cells = split_cells(cells)
    cpu["calibrate"] = -time.process_time()
    cpu["cells"] -= cpu["calibrate"]
    gap, nprobe, recall = calibrate_gap(cells, cosine)
    at_floor = gap_recall(cells, floor, gap)
    cpu["join"] = -time.process_time()
    cpu["calibrate"] -= cpu["join"]
    log.info(
        "vector self-join over %s: cells within %.4f of the nearest, at most %d of %d "
        "(recall %.4f at cosine %.2f, %.4f at %.2f)",
        cells.source,
        gap,
        nprobe,
        cells.nlist,
        recall,
        cosine,
        at_floor,
        floor,
    )
    work: dict[str, int] = {}
    table = ivf_join(
        cells,
        queries(),
        k=k,
        floor=floor,
        nprobe=nprobe,
        gap=gap,
        progress=progress,
        stats=work,
        own=cell_lookup(cells),
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
        pairs=table.pairs,
        cpu_s={step: round(t, 3) for step, t in cpu.items()},
    )
