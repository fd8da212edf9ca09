"""A corpus's float index cut into shards, each memory-mapped by one Ray actor on its own.

``plan_shards`` (driver) cuts the saved index file by what it holds: a ``Flat`` index by row
range (whole ``exact.DB_BLOCK``-row database blocks, so each block's BLAS products are the
local search's own), an IVF index by ranges of inverted lists (balanced by bytes). It finds
each shard's bytes in the file FAISS wrote (the vectors and id map of a Flat index, the
inverted lists at the end of an in-memory IVF file or in an on-disk ``.ivfdata`` file),
checks them against the driver's open store and hands a ``ShardSpec`` per actor. A
``FloatShard`` (actor) maps only those bytes with numpy, and answers the pieces of a search
that the driver merges (``ray_shard_search``): per database block (Flat) or per inverted list
(IVF, list by list) the candidates a ``TopK`` merge takes, or FAISS's own scan of its lists.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store import float_index
from splitaudit.indexer.store.exact import (
    DB_BLOCK,
    QUERY_BLOCK,
    TopK,
    in_parallel,
    one_blas_thread,
)
from splitaudit.indexer.store.float_index import FloatStore

# a TopK merge's candidates: scores and item ids (int32 where they fit)
Part = tuple[npt.NDArray[np.float32], npt.NDArray[np.signedinteger[Any]]]
ListPart = tuple[npt.NDArray[np.int32] | None, Part]  # (the query rows sent, their candidates)


@dataclass(frozen=True)
class ShardSpec:
    """Where one shard's bytes lie and how to read them.

    ``kind`` ``flat``: rows ``start:stop`` of a Flat index (vectors at ``vec_offset``, ids at
    ``ids_offset`` of ``path``, both for row 0). ``ivf``: inverted lists ``start:stop``;
    ``lists`` holds each one's (codes offset, ids offset, size) in ``path``.
    """

    kind: Literal["flat", "ivf"]
    shard: int
    path: str
    dim: int
    total: int
    start: int
    stop: int
    vec_offset: int = 0
    ids_offset: int = 0
    lists: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty((0, 3), np.int64))
    storage: str = "fp32"
    code_size: int = 0
    nlist: int = 0
    nprobe: int = 0
    qtype: int = 0
    sq_trained: npt.NDArray[np.float32] | None = None

    @property
    def items(self) -> int:
        """Vectors in this shard."""
        return self.stop - self.start if self.kind == "flat" else int(self.lists[:, 2].sum())


def plan_shards(store: FloatStore, folder: Path, parts: int) -> list[ShardSpec]:
    """About ``parts`` shards of the saved index in ``folder`` (the driver's open ``store``)."""
    if parts < 1:
        raise ValueError(f"shards must be at least 1, got {parts}")
    if store.is_exact:
        return _plan_flat(store, folder / float_index.INDEX_FILE, parts)
    return _plan_ivf(store, folder, parts)


def _plan_flat(store: FloatStore, path: Path, parts: int) -> list[ShardSpec]:
    n, d = store.count, store.dim
    size = path.stat().st_size
    ids_offset = size - 8 * n
    vec_offset = ids_offset - 8 - 4 * n * d
    with open(path, "rb") as fh:
        fh.seek(vec_offset - 8)
        vec_len = int(np.frombuffer(fh.read(8), np.uint64)[0])
        fh.seek(ids_offset - 8)
        ids_len = int(np.frombuffer(fh.read(8), np.uint64)[0])
    if vec_len != n * d or ids_len != n:
        raise IndexMismatchError(f"{path}: not the layout of a Flat index with an id map")
    blocks = -(-n // DB_BLOCK) if n else 0
    per = max(1, -(-blocks // parts))
    cuts = [*range(0, n, per * DB_BLOCK), n] if n else [0, 0]
    specs = [
        ShardSpec("flat", i, str(path), d, n, a, b, vec_offset=vec_offset, ids_offset=ids_offset)
        for i, (a, b) in enumerate(itertools.pairwise(cuts))
    ]
    if n:
        base, ids = store.vectors_view()
        for spec in (specs[0], specs[-1]):
            got = FloatShard(spec)
            row = spec.stop - 1 - spec.start
            if not (
                np.array_equal(got.vectors[row], base[spec.stop - 1])
                and got.ids[row] == ids[spec.stop - 1]
            ):
                raise IndexMismatchError(f"{path}: the mapped rows differ from the index's")
    return specs


def _plan_ivf(store: FloatStore, folder: Path, parts: int) -> list[ShardSpec]:
    import faiss

    index = store.index
    nlist, cs = int(index.nlist), int(index.code_size)
    invlists = index.invlists
    sizes = np.array([invlists.list_size(i) for i in range(nlist)], np.int64)
    table = np.zeros((nlist, 3), np.int64)
    table[:, 2] = sizes
    if store.is_ondisk:
        path = folder / str(store.params["ivfdata"])
        ondisk: Any = faiss.downcast_InvertedLists(invlists)
        for i in range(nlist):
            one = ondisk.lists.at(i)
            table[i, 0] = int(one.offset)
            table[i, 1] = int(one.offset) + int(one.capacity) * cs
    else:  # ArrayInvertedLists: at the end of the file, list by list, codes then ids
        path = folder / float_index.INDEX_FILE
        lengths = sizes * (cs + 8)
        starts = path.stat().st_size - int(lengths.sum()) + np.r_[0, np.cumsum(lengths)[:-1]]
        table[:, 0] = starts
        table[:, 1] = starts + sizes * cs
    storage = str(store.params.get("storage", "fp16"))
    sq = getattr(faiss.downcast_index(index), "sq", None) if storage == "sq8" else None
    # contiguous list ranges of about equal bytes
    bounds = np.searchsorted(np.cumsum(sizes), np.arange(1, parts) * sizes.sum() / parts)
    cuts = sorted({0, nlist, *(int(b) + 1 for b in bounds if 0 < int(b) + 1 < nlist)})
    specs = [
        ShardSpec(
            "ivf",
            i,
            str(path),
            store.dim,
            store.count,
            a,
            b,
            lists=table[a:b].copy(),
            storage=storage,
            code_size=cs,
            nlist=nlist,
            nprobe=int(index.nprobe),
            qtype=int(sq.qtype) if sq is not None else 0,
            sq_trained=faiss.vector_to_array(sq.trained).astype(np.float32) if sq else None,
        )
        for i, (a, b) in enumerate(itertools.pairwise(cuts))
    ]
    _check_ivf(store, specs)
    return specs


def _check_ivf(store: FloatStore, specs: list[ShardSpec]) -> None:
    """The first and last non-empty list of each shard read back as the store holds them."""
    for spec in specs:
        shard = FloatShard(spec)
        nonempty = [n for n in range(spec.start, spec.stop) if spec.lists[n - spec.start, 2]]
        for list_no in {nonempty[0], nonempty[-1]} if nonempty else set():
            ids, vecs = store.list_vectors(list_no)
            got_ids, got = shard.list_vectors(list_no)
            if not (np.array_equal(ids, got_ids) and np.array_equal(vecs, got)):
                raise IndexMismatchError(
                    f"{spec.path}: inverted list {list_no} differs from the index's"
                )


class FloatShard:
    """One shard of a float index, memory-mapped (only its own bytes) and searched in pieces."""

    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec
        self._faiss: Any = None
        self._quantizer: Any = None
        self._quantizer_sq: Any = None
        self._where: dict[int, tuple[int, int]] | None = None
        d = spec.dim
        if spec.kind == "flat":
            rows = spec.stop - spec.start
            self.vectors: npt.NDArray[np.float32] = (
                np.memmap(
                    spec.path, np.float32, "r", spec.vec_offset + 4 * d * spec.start, (rows, d)
                )
                if rows
                else np.empty((0, d), np.float32)
            )
            self.ids: npt.NDArray[np.int64] = (
                np.memmap(spec.path, np.int64, "r", spec.ids_offset + 8 * spec.start, (rows,))
                if rows
                else np.empty(0, np.int64)
            )
            self.mapped = rows * (4 * d + 8)
            return
        used = spec.lists[spec.lists[:, 2] > 0]
        self.low = int(used[:, 0].min()) if len(used) else 0
        high = int((used[:, 1] + 8 * used[:, 2]).max()) if len(used) else 0
        self.data = (
            np.memmap(spec.path, np.uint8, "r", self.low, (high - self.low,))
            if high > self.low
            else np.empty(0, np.uint8)
        )
        self.mapped = high - self.low

    def mapped_bytes(self) -> int:
        """Bytes of the index file(s) this shard maps."""
        return int(self.mapped)

    def list_vectors(self, list_no: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """One owned inverted list's item ids and float32 vectors (as ``FloatStore`` decodes)."""
        codes_at, ids_at, m = (int(v) for v in self.spec.lists[list_no - self.spec.start])
        d = self.spec.dim
        if m == 0:
            return np.empty(0, np.int64), np.empty((0, d), np.float32)
        cs = self.spec.code_size
        codes = self.data[codes_at - self.low : codes_at - self.low + m * cs]
        ids = self.data[ids_at - self.low : ids_at - self.low + 8 * m].view(np.int64).copy()
        if self.spec.storage == "fp32":
            return ids, np.asarray(codes.view(np.float32).reshape(m, d))
        if self.spec.storage == "fp16":
            return ids, codes.view(np.float16).reshape(m, d).astype(np.float32)
        return ids, self._sq().decode(np.ascontiguousarray(codes).reshape(m, cs))

    def _sq(self) -> Any:
        """The trained scalar quantizer of an ``sq8`` index (built once)."""
        if self._quantizer_sq is None:
            import faiss

            sq = faiss.ScalarQuantizer(self.spec.dim, self.spec.qtype)
            assert self.spec.sq_trained is not None
            faiss.copy_array_to_vector(self.spec.sq_trained, sq.trained)
            self._quantizer_sq = sq
        return self._quantizer_sq

    def flat_parts(self, queries: npt.NDArray[np.float32], k: int) -> list[Part]:
        """Per database block of this shard, the candidates ``TopK.update`` takes from it for
        each query (the local exact search's products: 1,024-query blocks, one BLAS thread)."""
        out: list[Part] = []
        with one_blas_thread():
            for bs in range(0, len(self.vectors), DB_BLOCK):
                block = np.asarray(self.vectors[bs : bs + DB_BLOCK], dtype=np.float32)
                ids = np.asarray(self.ids[bs : bs + DB_BLOCK])

                def piece(qs: int, block: npt.NDArray[np.float32] = block, ids: Any = ids) -> Part:
                    return take_part(queries[qs : qs + QUERY_BLOCK] @ block.T, ids, k)

                pieces = list(in_parallel(piece, range(0, len(queries), QUERY_BLOCK)))
                out.append(
                    (np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces]))
                )
        return out

    def list_parts(
        self,
        queries: npt.NDArray[np.float32],
        lists: npt.NDArray[np.int64],
        rows: npt.NDArray[np.int64],
        bounds: npt.NDArray[np.int64],
        k: int,
        first: int = 0,
        groups: int = 1,
    ) -> list[ListPart]:
        """Per probed list ``lists[j]`` (queries ``rows[bounds[j]:bounds[j+1]]``), the
        candidates ``TopK.update_rows`` takes from it (one BLAS thread, as the local
        list-by-list search), for the rows that may still enter their top ``k``.

        The local scan deals list ``first + j`` (its place among all probed lists) to top-k
        number ``(first + j) % groups`` and skips a row none of whose scores beats that
        top-k's ``k``-th best. This shard keeps such top-k of its own lists: their ``k``-th
        best can only be lower than the whole scan's, so a row skipped here is skipped there
        too and is not sent (``keep``: the rows sent, None for all)."""
        out: list[ListPart] = []
        tops = [TopK(len(queries), k) for _ in range(groups)]
        with threadpool_limits(limits=1, user_api="blas"):
            for j, list_no in enumerate(lists.tolist()):
                ids, vecs = self.list_vectors(int(list_no))
                qrows = rows[bounds[j] : bounds[j + 1]]
                if len(ids) == 0:
                    empty = (
                        np.empty((len(qrows), 0), np.float32),
                        np.empty((len(qrows), 0), np.int64),
                    )
                    out.append((None, empty))
                    continue
                scores = queries[qrows] @ vecs.T
                top = tops[(first + j) % groups]
                if len(ids) < k:  # every row is merged
                    part = take_part(scores, ids, k)
                    replay_part(top, qrows, part)
                    out.append((None, part))
                    continue
                kth = top.scores[qrows].min(axis=1)
                keep = np.flatnonzero((scores > kth[:, None]).any(axis=1))
                part = take_part(scores[keep], ids, k)
                replay_part(top, qrows[keep], part)
                out.append((keep.astype(np.int32), part))
        return out

    def faiss_search(
        self,
        queries: npt.NDArray[np.float32],
        k: int,
        keys: npt.NDArray[np.int64],
        coarse: npt.NDArray[np.float32],
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """FAISS's own scan (``search_preassigned``) of the probes ``keys`` that fall in this
        shard's lists; the others are skipped."""
        index = self._faiss_index()
        own = (keys >= self.spec.start) & (keys < self.spec.stop)
        scores, ids = index.search_preassigned(
            np.ascontiguousarray(queries, dtype=np.float32),
            k,
            np.ascontiguousarray(np.where(own, keys, -1), dtype=np.int64),
            np.ascontiguousarray(coarse, dtype=np.float32),
        )
        return scores, ids

    def _faiss_index(self) -> Any:
        """An IVF index holding this shard's lists only (read into memory on first use)."""
        if self._faiss is not None:
            return self._faiss
        import faiss

        spec, d = self.spec, self.spec.dim
        quantizer = faiss.IndexFlatIP(d)
        index: Any
        if spec.storage == "fp32":
            index = faiss.IndexIVFFlat(quantizer, d, spec.nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            qtype = faiss.ScalarQuantizer.QT_fp16 if spec.storage == "fp16" else int(spec.qtype)
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, d, spec.nlist, qtype, faiss.METRIC_INNER_PRODUCT
            )
            if spec.sq_trained is not None:
                faiss.copy_array_to_vector(spec.sq_trained, index.sq.trained)
        index.by_residual = False
        index.is_trained = True
        cs = spec.code_size
        for list_no in range(spec.start, spec.stop):
            codes_at, ids_at, m = (int(v) for v in spec.lists[list_no - spec.start])
            if m:
                codes = np.ascontiguousarray(
                    self.data[codes_at - self.low : codes_at - self.low + m * cs]
                )
                ids = self.data[ids_at - self.low : ids_at - self.low + 8 * m].view(np.int64)
                index.invlists.add_entries(
                    list_no, m, faiss.swig_ptr(np.ascontiguousarray(ids)), faiss.swig_ptr(codes)
                )
        index.ntotal = spec.items
        index.nprobe = spec.nprobe
        self._faiss, self._quantizer = index, quantizer  # the quantizer outlives the index
        return index

    def reconstruct(self, ids: npt.NDArray[np.int64]) -> dict[int, npt.NDArray[np.float32]]:
        """The stored vectors of those ``ids`` this shard holds."""
        if self._where is None:
            self._where = self._positions()
        out: dict[int, npt.NDArray[np.float32]] = {}
        for item in np.asarray(ids).tolist():
            at = self._where.get(int(item))
            if at is None:
                continue
            owner, pos = at
            if self.spec.kind == "flat":
                out[int(item)] = np.array(self.vectors[pos], np.float32)
            else:
                out[int(item)] = self.list_vectors(owner)[1][pos].copy()
        return out

    def _positions(self) -> dict[int, tuple[int, int]]:
        if self.spec.kind == "flat":
            return {int(i): (0, n) for n, i in enumerate(np.asarray(self.ids).tolist())}
        where: dict[int, tuple[int, int]] = {}
        for list_no in range(self.spec.start, self.spec.stop):
            ids, _vecs = self.list_vectors(list_no)
            where.update({int(i): (list_no, n) for n, i in enumerate(ids.tolist())})
        return where


def replay_part(top: TopK, rows: Any, part: Part) -> None:
    """``TopK.update_rows(rows, ...)`` from the candidates it takes of a block (``take_part``)."""
    scores, ids = part
    if scores.shape[1] == 0 or scores.shape[0] == 0:
        return
    cand_s = np.concatenate([top.scores[rows], scores], axis=1)
    cand_i = np.concatenate([top.ids[rows], ids], axis=1)
    sel = np.argpartition(-cand_s, top.k - 1, axis=1)[:, : top.k]
    top.scores[rows] = np.take_along_axis(cand_s, sel, 1)
    top.ids[rows] = np.take_along_axis(cand_i, sel, 1)


def take_part(scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], k: int) -> Part:
    """What ``TopK.update_rows`` keeps of one ``(queries, items)`` score block: each row's
    ``min(k, items)`` best, chosen by the same ``argpartition``. Ids below 2**31 travel as
    int32 (a third less to send; the merge widens them back)."""
    m = scores.shape[1]
    kk = min(k, m)
    part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
    chosen: npt.NDArray[np.signedinteger[Any]] = ids[part]
    if chosen.size and int(ids.min()) >= -(2**31) and int(ids.max()) < 2**31:
        chosen = chosen.astype(np.int32)
    return np.take_along_axis(scores, part, 1), chosen


def process_rss() -> int:
    """This process's resident set size in bytes (Linux; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except OSError:
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")
