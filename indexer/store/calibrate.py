"""Build-time recall measurement: held-back queries, exact ground truth, nprobe tuning, Hamming recall."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.exact import TopK, recall_at_k
from splitaudit.indexer.store.vectors import iter_batches

log = logging.getLogger(__name__)
QUERY_NOISE = 0.5  # norm of the perturbation added to a held-back vector (cosine ~0.9 to it)
CHUNK_ROWS = 16_384

BatchRef = tuple[str, int]  # (batch file name, vector count)
SearchFn = Callable[[npt.NDArray[np.float32], int], npt.NDArray[np.int64]]


@dataclass
class CalibrationSet:
    """Held-back queries, the item each came from, and its exact top-k (that item excluded)."""

    queries: npt.NDArray[np.float32]
    source_ids: npt.NDArray[np.int64]
    truth: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty((0, 0), np.int64))


def iter_chunks(
    corpus_dir: Path, batches: Sequence[BatchRef], min_rows: int = CHUNK_ROWS
) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
    """Stream batch files as (ids, vectors) chunks of at least ``min_rows`` rows (the last may be smaller)."""
    ids_parts: list[npt.NDArray[np.int64]] = []
    vec_parts: list[npt.NDArray[np.float32]] = []
    held = 0
    for ids, vecs in iter_batches(corpus_dir, [name for name, _ in batches]):
        ids_parts.append(ids)
        vec_parts.append(vecs)
        held += len(ids)
        if held >= min_rows:
            yield np.concatenate(ids_parts), np.concatenate(vec_parts)
            ids_parts, vec_parts, held = [], [], 0
    if held:
        yield np.concatenate(ids_parts), np.concatenate(vec_parts)


def gather_rows(
    corpus_dir: Path, batches: Sequence[BatchRef], rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The ids and vectors at global row positions ``rows`` (sorted), streaming over the batches."""
    rows = np.sort(rows)
    out_ids: list[npt.NDArray[np.int64]] = []
    out_vecs: list[npt.NDArray[np.float32]] = []
    offset = 0
    for ids, vecs in iter_chunks(corpus_dir, batches):
        lo, hi = np.searchsorted(rows, [offset, offset + len(ids)])
        if hi > lo:
            local = rows[lo:hi] - offset
            out_ids.append(ids[local])
            out_vecs.append(vecs[local])
        offset += len(ids)
    if not out_ids:
        return np.empty(0, np.int64), np.empty((0, 0), np.float32)
    return np.concatenate(out_ids), np.concatenate(out_vecs)


def perturbed_queries(
    base: npt.NDArray[np.float32], rng: np.random.Generator, noise: float = QUERY_NOISE
) -> npt.NDArray[np.float32]:
    """Unit queries near ``base`` rows: like a test image close to, but not in, the corpus."""
    q = base + noise * rng.standard_normal(base.shape, dtype=np.float32) / np.sqrt(base.shape[1])
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


class TruthAccumulator:
    """Exact top-k of the calibration queries, fed chunk by chunk (the source item excluded)."""

    def __init__(self, cal: CalibrationSet, k: int) -> None:
        self.cal = cal
        self.k = k
        self._top = TopK(len(cal.queries), k + 1)

    def update(self, ids: npt.NDArray[np.int64], vecs: npt.NDArray[np.float32]) -> None:
        """Score one chunk of the corpus."""
        if len(self.cal.queries):
            self._top.update_dot(self.cal.queries, vecs, ids)

    def finish(self) -> CalibrationSet:
        """Store the ground truth in the calibration set and return it."""
        _, ids = self._top.result()
        self.cal.truth = drop_sources(ids, self.cal.source_ids, self.k)
        return self.cal


def drop_sources(
    ids: npt.NDArray[np.int64], sources: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.int64]:
    """Remove each query's source item from its result row, keeping the first ``k`` others."""
    out = np.full((len(ids), k), -1, np.int64)
    for r in range(len(ids)):
        row = ids[r][ids[r] != sources[r]][:k]
        out[r, : len(row)] = row
    return out


def measure_recall(search: SearchFn, cal: CalibrationSet, k: int) -> float:
    """recall@k of ``search(queries, k + 1)`` (source items removed) against the exact truth."""
    found = drop_sources(search(cal.queries, k + 1), cal.source_ids, k)
    return recall_at_k(found, cal.truth)


def tune_nprobe(
    set_nprobe: Callable[[int], None],
    search: SearchFn,
    cal: CalibrationSet,
    *,
    nlist: int,
    k: int,
    target: float,
) -> tuple[int, float, list[tuple[int, float]]]:
    """Smallest ``nprobe`` whose measured recall@k reaches ``target``; (nprobe, recall, curve).

    If no nprobe reaches it (lossy storage), the smallest one within 0.001 of the best
    recall seen is chosen, and a warning is logged.
    """
    curve: dict[int, float] = {}

    def probe(n: int) -> float:
        if n not in curve:
            set_nprobe(n)
            curve[n] = measure_recall(search, cal, k)
        return curve[n]

    n = 1
    while probe(n) < target and n < nlist:
        n = min(nlist, n * 2)
    if curve[n] >= target:
        lo, hi = n // 2, n  # lo fails (or is 0), hi passes
        while hi - lo > max(1, hi // 8):
            mid = (lo + hi) // 2
            if probe(mid) >= target:
                hi = mid
            else:
                lo = mid
        chosen = hi
    else:
        best = max(curve.values())
        chosen = min(p for p, r in curve.items() if r >= best - 0.001)
        log.warning(
            "IVF recall@%d reaches at most %.4f (< target %.3f): the storage's rounding "
            "reorders near-tied neighbours; --index-storage fp32 keeps exact scores",
            k,
            best,
            target,
        )
    set_nprobe(chosen)
    return chosen, curve[chosen], sorted(curve.items())


def flip_bits(
    codes: npt.NDArray[np.uint64], max_bits: int, rng: np.random.Generator
) -> npt.NDArray[np.uint64]:
    """Copies of ``codes`` with 0..``max_bits`` random distinct bits flipped each."""
    out = codes.astype(np.uint64, copy=True)
    for i, n in enumerate(rng.integers(0, max_bits + 1, len(out))):
        for bit in rng.choice(64, int(n), replace=False):
            out[i] ^= np.uint64(1) << np.uint64(int(bit))
    return out


def hamming_recall(
    approx: Callable[
        [npt.NDArray[np.uint64], int], list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]]
    ],
    brute: Callable[
        [npt.NDArray[np.uint64], int], list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]]
    ],
    queries: npt.NDArray[np.uint64],
    radius: int,
) -> float:
    """Fraction of the brute-force hits within ``radius`` that ``approx`` also returns."""
    hits = total = 0
    for (a, _), (b, _) in zip(approx(queries, radius), brute(queries, radius), strict=True):
        want = set(b.tolist())
        hits += len(want & set(a.tolist()))
        total += len(want)
    return hits / total if total else 1.0


def knn_within_recall(
    found: tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]],
    truth: tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]],
) -> tuple[float, float]:
    """(recall@k, recall@1) of a "k nearest within a radius" search against the exhaustive one.

    Both are ``(distances, ids)`` arrays padded with id -1. Tie-aware: a found hash counts when
    it is no farther than the exhaustive search's k-th (or 1st) hit of its row.
    """
    (fd, fi), (td, ti) = found, truth
    valid_t, valid_f = ti >= 0, fi >= 0
    n_truth = valid_t.sum(axis=1)
    kth = np.where(
        n_truth > 0, np.take_along_axis(td, np.maximum(n_truth - 1, 0)[:, None], 1)[:, 0], -1
    )
    good = (valid_f & (fd <= kth[:, None])).sum(axis=1)
    total = int(n_truth.sum())
    at_k = float(np.minimum(good, n_truth).sum() / total) if total else 1.0
    has = n_truth > 0
    first = valid_f[:, 0] & (fd[:, 0] <= td[:, 0])
    at_1 = float(first[has].mean()) if has.any() else 1.0
    return at_k, at_1
