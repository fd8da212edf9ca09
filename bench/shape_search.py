"""``python -m bench.shape_search``: what the audit's shape search costs as the corpus grows.

A small test image asks for its ``SHAPE_TOP_K`` nearest corpus thumbnails by shape descriptor
(``store.shape_index.ShapeStore.search``: exact, numpy blocks over float16 rows). This times
that search for ``--queries`` descriptors against synthetic stores of each ``--sizes``
thumbnails (non-negative unit vectors, as the descriptors are), beside FAISS's exhaustive
``IndexFlatIP`` over the same rows in float32 in the same run, and checks both return the same
neighbours. Prints CPU and wall seconds, microseconds per query per million thumbnails, the
store's bytes, and the growth from the first size to the last.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.db.shape_blob import DTYPE, SHAPE_DIM
from splitaudit.indexer.match.pair_search import SHAPE_TOP_K
from splitaudit.indexer.store.shape_index import ShapeStore


def descriptors(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    """``n`` non-negative unit rows (chunked: 1M rows never exist as float64)."""
    out = np.empty((n, SHAPE_DIM), np.float32)
    for start in range(0, n, 100_000):
        part = np.abs(rng.standard_normal((min(100_000, n - start), SHAPE_DIM))).astype(np.float32)
        out[start : start + len(part)] = part / np.linalg.norm(part, axis=1, keepdims=True)
    return out


def measure(n: int, queries: npt.NDArray[np.float32], rng: np.random.Generator) -> float:
    """Search ``queries`` against ``n`` synthetic thumbnails, ours and FAISS's; print; our CPU-s."""
    import faiss

    store = ShapeStore(np.arange(n, dtype=np.int64), descriptors(rng, n).astype(DTYPE))
    wall, cpu = time.perf_counter(), time.process_time()
    _scores, ids = store.search(queries, SHAPE_TOP_K)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    flat = faiss.IndexFlatIP(SHAPE_DIM)
    flat.add(store.vectors.astype(np.float32))
    f_wall, f_cpu = time.perf_counter(), time.process_time()
    _f_scores, f_ids = flat.search(queries, SHAPE_TOP_K)
    f_wall, f_cpu = time.perf_counter() - f_wall, time.process_time() - f_cpu
    same = np.mean(
        [
            len(set(a) & set(b)) / SHAPE_TOP_K
            for a, b in zip(ids.tolist(), f_ids.tolist(), strict=True)
        ]
    )
    per = 1e6 * cpu / len(queries) / (n / 1e6)
    print(
        f"{n:>9,} thumbnails ({store.vectors.nbytes / 2**20:,.0f} MiB): shape search of "
        f"{len(queries):,} queries {cpu:.2f} CPU-s / {wall:.2f} s wall "
        f"({per:,.0f} us CPU per query per 1M thumbnails); FAISS IndexFlatIP float32 "
        f"{f_cpu:.2f} CPU-s / {f_wall:.2f} s ({cpu / max(f_cpu, 1e-9):.2f}x ours / FAISS); "
        f"same neighbours {same:.4f}"
    )
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.shape_search", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000", help="store sizes (thumbnails)")
    parser.add_argument("--queries", type=int, default=2_000, help="small test images")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sizes = [int(v) for v in args.sizes.split(",")]
    rows = [(n, measure(n, descriptors(rng, args.queries), rng)) for n in sizes]
    if len(rows) > 1:
        (n0, c0), (n1, c1) = rows[0], rows[-1]
        print(f"growth {n0:,} -> {n1:,} ({n1 / n0:.0f}x the thumbnails): {c1 / c0:.2f}x CPU")


if __name__ == "__main__":
    main()
