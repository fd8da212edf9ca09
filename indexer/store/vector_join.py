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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.store.float_build import spherical_kmeans
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.neighbours import Neighbours

log = logging.getLogger(__name__)
EXACT_JOIN_MAX = 50_000  # vectors joined exhaustively; beyond, cell by cell
JOIN_RECALL = 0.999  # of pairs at the calibration cosine
CALIBRATION_PAIRS = 4_000
QUERY_BATCH = 65_536
DECODE_CACHE_BYTES = 1 << 30  # decoded IVF lists kept across query batches up to this size
_EXACT_BLOCK = 2_048
JOIN_CELL = 400  # target vectors per join cell (``split_cells``)

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
    nprobe: int = 0
    cosine: float | None = None
    recall: float | None = None
    recall_at_floor: float | None = None
    pairs: int = 0

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

    def fetch(cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        rows = order[bounds[cell] : bounds[cell + 1]]
        return ids[rows], vectors[rows]

    return Cells(centroids, sizes, fetch, source=f"kmeans{nlist}", cache_limit=0)


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
    for cell in range(cells.nlist):
        size = int(cells.sizes[cell])
        parts = max(1, round(size / target))
        if parts == 1:
            centroids.append(cells.centroids[cell][None])
            members.append((cell, np.arange(size, dtype=np.int64)))
            continue
        _ids, vecs = cells.get(cell)
        sub = spherical_kmeans(np.ascontiguousarray(vecs), parts, iters=5, rng=rng)
        assign = np.argmax(vecs @ sub.T, axis=1)
        for j in range(parts):
            rows = np.flatnonzero(assign == j)
            if len(rows):
                centroids.append(sub[j][None])
                members.append((cell, rows.astype(np.int64)))
    last: list[Any] = [None, None]  # the parent fetched last (sub-cells are probed in order)

    def fetch(sub_cell: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        parent, rows = members[sub_cell]
        if last[0] != parent:
            last[0], last[1] = parent, cells.get(parent)
        ids, vecs = last[1]
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
) -> npt.NDArray[np.int64]:
    """The ``nprobe`` cells nearest each query row (FAISS's flat search: ~3x less CPU than a
    numpy argpartition of the score matrix)."""
    if nprobe >= len(centroids):
        return np.tile(np.arange(len(centroids), dtype=np.int64), (len(q), 1))
    import faiss

    quantizer = faiss.IndexFlatIP(centroids.shape[1])
    quantizer.add(np.ascontiguousarray(centroids, dtype=np.float32))
    _scores, cells = quantizer.search(np.ascontiguousarray(q, dtype=np.float32), nprobe)
    return cells.astype(np.int64)


def pair_ranks(
    cells: Cells, cosine: float, *, pairs: int = CALIBRATION_PAIRS, seed: int = 0
) -> npt.NDArray[np.int64]:
    """For synthetic pairs at exactly ``cosine``, the probe count each needs to be joined.

    Each pair is a sampled corpus vector and a unit vector at ``cosine`` to it (random
    direction). The join finds the pair when either one's ``nprobe`` nearest cells include
    the other's cell: the pair needs ``nprobe > rank``.
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
    rows = np.arange(len(q))
    cell_q = np.argmax(sq, axis=1)
    rank_q = (sq > sq[rows, cell_of][:, None]).sum(axis=1)  # v's cell among q's probes
    rank_v = (sv > sv[rows, cell_q][:, None]).sum(axis=1)  # q's cell among v's probes
    return np.minimum(rank_q, rank_v).astype(np.int64)


def calibrate_nprobe(
    cells: Cells, cosine: float, *, target: float = JOIN_RECALL, seed: int = 0
) -> tuple[int, float]:
    """Smallest ``nprobe`` joining ``target`` of the pairs at ``cosine``; (nprobe, recall)."""
    rank = pair_ranks(cells, cosine, seed=seed)
    need = int(np.quantile(rank, target, method="higher")) + 1 if len(rank) else 1
    nprobe = min(max(need, 1), cells.nlist)
    return nprobe, float((rank < nprobe).mean()) if len(rank) else 1.0


def _rebatch(
    chunks: Chunks, rows: int
) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
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


class _Pairs:
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

        all_keys = np.unique(cat(keys, np.int64))
        q, i, s = cat(self.q, np.int64), cat(self.i, np.int64), cat(self.s, np.float32)
        if symmetric and len(q):
            back = np.isin(i, all_keys) & (i != q)
            q, i, s = np.r_[q, i[back]], np.r_[i, q[back]], np.r_[s, s[back]]
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
    out, keys = _Pairs(), []
    for qids, q in _rebatch(queries, _EXACT_BLOCK):
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
    progress: Callable[[int], None] | None = None,
) -> Neighbours:
    """Each query's ``k`` best vectors with cosine >= ``floor`` among its ``nprobe`` nearest cells."""
    out, keys = _Pairs(), []
    done = 0
    for qids, q in _rebatch(queries, QUERY_BATCH):
        keys.append(qids)
        coarse = nearest_cells(q, cells.centroids, nprobe).ravel()
        order = np.argsort(coarse, kind="stable")
        by_cell = coarse[order]
        rows = np.repeat(np.arange(len(q)), min(nprobe, cells.nlist))[order]
        starts = np.flatnonzero(np.r_[True, by_cell[1:] != by_cell[:-1]])
        bounds = np.r_[starts, len(by_cell)]
        # ~nlist products per batch: BLAS's own threads only slow small ones (float_index)
        with threadpool_limits(limits=1, user_api="blas"):
            for j, start in enumerate(starts.tolist()):
                ids, vecs = cells.get(int(by_cell[start]))
                if len(ids) == 0:
                    continue
                qrows = rows[start : bounds[j + 1]]
                scores = q[qrows] @ vecs.T
                r, c = _above(scores, floor, k)
                out.add(qids[qrows[r]], ids[c], scores[r, c])
        done += len(q)
        if progress is not None:
            progress(done)
    return out.table(keys, k, symmetric=True)


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
    if store.is_exact:
        from splitaudit.indexer.store.policy import IndexPolicy

        base, ids = store.vectors_view()
        cells = kmeans_cells(ids.copy(), base, IndexPolicy().nlist_for(store.count))
    else:
        cells = ivf_cells(store)
    cells = split_cells(cells)
    nprobe, recall = calibrate_nprobe(cells, cosine)
    at_floor = float((pair_ranks(cells, floor) < nprobe).mean())
    log.info(
        "vector self-join over %s: nprobe %d of %d (recall %.4f at cosine %.2f, %.4f at %.2f)",
        cells.source,
        nprobe,
        cells.nlist,
        recall,
        cosine,
        at_floor,
        floor,
    )
    table = ivf_join(cells, queries(), k=k, floor=floor, nprobe=nprobe, progress=progress)
    return table, JoinReport(
        "ivf",
        nlist=cells.nlist,
        nprobe=nprobe,
        cosine=cosine,
        recall=round(recall, 5),
        recall_at_floor=round(at_floor, 5),
        pairs=table.pairs,
    )
