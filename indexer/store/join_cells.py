"""Join cells: a partition of the corpus vectors for the cell-by-cell self-join, and the
coarse step that picks the cells each item probes.

Cells are an IVF store's own inverted lists (``ivf_cells``) or a k-means partition of a Flat
store's vectors (``kmeans_cells``), cut to ~``JOIN_CELL`` vectors each (``split_cells``).
``cells_within`` is the coarse step: each item probes the cells whose centroid scores within a
calibrated gap of its best one (``join_calibrate.calibrate_gap``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.store.float_build import spherical_kmeans
from splitaudit.indexer.store.float_index import FloatStore

DECODE_CACHE_BYTES = 1 << 30  # decoded IVF lists kept across query batches up to this size
JOIN_CELL = 400  # target vectors per join cell (``split_cells``)
_COARSE_BLOCK = 128  # query rows scored against every centroid at once (``cells_within``)


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
    # the parent fetched last (sub-cells are probed in order), as one (parent, (ids, vectors))
    # tuple: the join's batch threads read and replace it whole, never half of it
    last: list[Any] = [(-1, None)]

    def fetch(sub_cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        hit = kept.get(sub_cell)
        if hit is not None:
            return hit
        parent, rows = members[sub_cell]
        held = last[0]
        if held[0] != parent:
            held = (parent, cells.get(parent))
            last[0] = held
        ids, vecs = held[1]
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
    best: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(row, cell)`` of every cell whose centroid scores within ``gap`` of the row's best one
    (at most ``cap`` per row: the best), rows ascending; ``own``: each row's own cell (-1:
    none), added where missing; ``best``: filled with each row's best cell. Blocks of
    ``_COARSE_BLOCK`` rows keep the score matrix in L2: 2.5x less CPU than FAISS's flat
    top-``cap`` search (65,536 queries x 2,329 cells: 0.57 CPU-s against 1.41 for a top-110,
    blocks of 512); blocks of 128 and no count pass, with ``probe_cells``' ordering: 0.60
    CPU-s against 0.75 (same run)."""
    rows_l: list[npt.NDArray[np.int64]] = []
    cells_l: list[npt.NDArray[np.int64]] = []
    with threadpool_limits(limits=1, user_api="blas"):
        for s in range(0, len(q), _COARSE_BLOCK):
            scores = q[s : s + _COARSE_BLOCK] @ centroids.T
            if best is None:
                peak = scores.max(axis=1)
            else:  # the best cell's index and its score in one pass over the block
                top = scores.argmax(axis=1)
                best[s : s + _COARSE_BLOCK] = top
                peak = scores[np.arange(len(scores)), top]
            keep = scores >= (peak - gap)[:, None]
            # flat positions, then divmod: ~5x less CPU than a 2-D np.nonzero (same order); the
            # rows over the cap counted from them, not by another pass over the block
            r, c = np.divmod(np.flatnonzero(keep), keep.shape[1])
            over = np.flatnonzero(np.bincount(r, minlength=len(keep)) > cap)
            if len(over):  # rare: a row with more than cap cells within the gap keeps its best
                top = np.argpartition(-scores[over], cap - 1, axis=1)[:, :cap]
                keep[over] = False
                keep[over[:, None], top] = True
                r, c = np.divmod(np.flatnonzero(keep), keep.shape[1])
            if own is not None:
                mine = own[s : s + _COARSE_BLOCK]
                inside = np.flatnonzero(mine >= 0)
                out = inside[~keep[inside, mine[inside]]]
                if len(out):  # own cells outside the gap, merged in (row, cell) order
                    flat = np.sort(np.r_[r * keep.shape[1] + c, out * keep.shape[1] + mine[out]])
                    r, c = np.divmod(flat, keep.shape[1])
            rows_l.append(r + s)
            cells_l.append(c)
    if not rows_l:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(rows_l), np.concatenate(cells_l)


def voronoi_cells(
    cells: Cells, ids: npt.NDArray[np.int64], assigned: npt.NDArray[np.int64]
) -> Cells:
    """``cells``' vectors regrouped under the same centroids by ``assigned``, the cell each item
    of ``ids`` goes to (its nearest centroid, which the join's coarse pass finds): the Voronoi
    partition of those centroids. ``split_cells`` keeps each sub-cell inside its list, so an
    item near a list's border stays in a sub-cell whose centroid is not its nearest (27.7% of
    1M uniform 64-d vectors), and the probing that finds its pairs must reach further. Items
    not in ``ids`` stay in their cell. One copy of every vector, in cell order: callers call
    it only where the decoded vectors fit ``DECODE_CACHE_BYTES``."""
    order = np.argsort(ids, kind="stable")
    keys, to = ids[order], assigned[order]
    parts = [cells.get(c)[0] for c in range(cells.nlist)]
    every = np.concatenate(parts) if parts else np.empty(0, np.int64)
    where = np.repeat(np.arange(cells.nlist, dtype=np.int64), [len(p) for p in parts])
    if len(keys) and len(every):
        pos = np.minimum(np.searchsorted(keys, every), len(keys) - 1)
        found = keys[pos] == every
        where[found] = to[pos[found]]
    sizes = np.bincount(where, minlength=cells.nlist).astype(np.int64)
    bounds = np.r_[0, np.cumsum(sizes)]
    dest = np.empty(len(where), np.int64)  # each item's row in the cell-ordered copy
    dest[np.argsort(where, kind="stable")] = np.arange(len(where))
    cell_ids = np.empty(len(where), np.int64)
    cell_vecs = np.empty((len(where), cells.centroids.shape[1]), np.float32)
    start = 0
    for c in range(cells.nlist):
        got_ids, got_vecs = cells.get(c)
        rows = dest[start : start + len(got_ids)]
        cell_ids[rows], cell_vecs[rows] = got_ids, got_vecs
        start += len(got_ids)
        cells.drop(c)

    def fetch(cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        lo, hi = int(bounds[cell]), int(bounds[cell + 1])
        return cell_ids[lo:hi], cell_vecs[lo:hi]

    return Cells(cells.centroids, sizes, fetch, source=f"{cells.source}/voronoi", cache_limit=0)


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


def centroid_graph(centroids: npt.NDArray[np.float32], width: int) -> npt.NDArray[np.int64]:
    """Each cell's ``width`` nearest cells by the cosine of their centroids, nearest first, the
    cell itself first of all: the two-level coarse step's candidates (``cells_near_own``)."""
    nlist = len(centroids)
    width = min(width, nlist)
    unit = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    out = np.empty((nlist, width), np.int64)
    with threadpool_limits(limits=1, user_api="blas"):
        for s in range(0, nlist, 1024):
            sims = unit[s : s + 1024] @ unit.T
            sims[np.arange(len(sims)), np.arange(s, s + len(sims))] = np.inf  # itself first
            top = (
                np.argpartition(-sims, width - 1, axis=1)[:, :width]
                if width < nlist
                else np.tile(np.arange(nlist), (len(sims), 1))
            )
            rank = np.argsort(-np.take_along_axis(sims, top, 1), axis=1, kind="stable")
            out[s : s + len(sims)] = np.take_along_axis(top, rank, 1)
    return out


def cells_near_own(
    q: npt.NDArray[np.float32],
    centroids: npt.NDArray[np.float32],
    graph: npt.NDArray[np.int64],
    gap: float,
    cap: int,
    own: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The two-level coarse step: ``(row, cell)`` of the cells ``cells_within`` would keep
    (within ``gap`` of the best, at most ``cap``, the row's own cell added), chosen among
    ``graph[own]`` (``centroid_graph``: the cells nearest the row's own cell) instead of every
    cell; rows in no cell (``own`` -1) get the full step. Rows grouped by their own cell: one
    product per cell against its ``width`` neighbours' centroids, ``width`` scores per row
    instead of ``nlist``. Unordered (``probe_cells`` sorts)."""
    width = graph.shape[1]
    inside = np.flatnonzero(own >= 0)
    order = inside[np.argsort(own[inside], kind="stable")]
    mine = own[order]
    starts = np.flatnonzero(np.r_[True, mine[1:] != mine[:-1]]) if len(mine) else mine
    bounds = np.r_[starts, len(mine)]
    scores = np.empty((len(order), width), np.float32)
    qs = q[order]
    with threadpool_limits(limits=1, user_api="blas"):
        for j, start in enumerate(starts.tolist()):
            end = int(bounds[j + 1])
            scores[start:end] = qs[start:end] @ centroids[graph[mine[start]]].T
    keep = scores >= (scores.max(axis=1, initial=-np.inf) - gap)[:, None]
    over = np.flatnonzero(np.count_nonzero(keep, axis=1) > cap)
    if len(over):  # rare: more than cap cells within the gap keeps the best
        top = np.argpartition(-scores[over], cap - 1, axis=1)[:, :cap]
        keep[over] = False
        keep[over[:, None], top] = True
    keep[:, 0] = True  # the row's own cell (first in its graph row)
    pos, nth = np.divmod(np.flatnonzero(keep), width)
    rows, cells = order[pos], graph[mine[pos], nth]
    outside = np.flatnonzero(own < 0)
    if len(outside):
        r, c = cells_within(q[outside], centroids, gap, cap)
        rows, cells = np.r_[rows, outside[r]], np.r_[cells, c]
    return rows.astype(np.int64), cells.astype(np.int64)


def probe_cells(
    q: npt.NDArray[np.float32],
    centroids: npt.NDArray[np.float32],
    gap: float,
    cap: int,
    own: npt.NDArray[np.int64] | None,
    graph: npt.NDArray[np.int64] | None = None,
    best: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(row, cell)`` of every cell each query row probes, sorted by cell, rows ascending
    within a cell (the order ``score_cells`` takes): ``cells_within`` over every centroid, or
    with ``graph`` (and ``own``) the two-level ``cells_near_own``. ``best`` (the full step
    only): filled with each row's best cell."""
    if graph is not None and own is not None:
        rows, cells = cells_near_own(q, centroids, graph, gap, cap, own)
    else:
        rows, cells = cells_within(q, centroids, gap, cap, own, best)
    # one sort of (cell, row) keys: ~5x less CPU than a stable argsort of the cells + gathers
    key = cells * max(1, len(q)) + rows
    key.sort()
    cells, rows = np.divmod(key, max(1, len(q)))
    return rows, cells
