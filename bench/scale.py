"""Scale: a synthetic 1,000,000-item corpus (and 100,000 / 300,000 for growth) indexed and audited here.

Run: ``.venv/bin/python -m bench.scale [--sizes 100000,300000,1000000] [--queries 10000] [--dir bench/.cache/scale]``

Each size runs in its own process (so peak RSS is per size) and does what a real corpus does,
minus decoding: DB rows bulk-inserted (executemany), vector batch files written as the
indexer writes them, then ``sync_corpus_index`` derives the FAISS stores (Flat up to 100k
vectors, IVF + fp16 beyond, nprobe calibrated at build time; hashes get multi-index hashing
from 100k). Then 10,000 audit queries run through the same calls the audit engine makes:

- exact: ``Item.sha256 IN (...)`` and ``Item.pixel_digest IN (...)`` in chunks of 500 (EXPLAIN
  shows the index used);
- near: ``BinaryStore.search_radius`` at Hamming <= 8 for the pHash and the mirrored pHash,
  plus ``search_knn_within(10, 20)`` for both (the engine's verification candidates; the
  exhaustive ``search_knn(10)`` they replaced is timed on the subset below);
- semantic: ``FloatStore.search(k=10)`` over all queries in one call (IVF then scores list by
  list with BLAS), and again in the audit engine's chunks of 1024 queries (FAISS's own search).

Baselines measured in the same run on a 1,000-query subset: exact search by numpy BLAS
streamed over the batch files (the ground truth of recall@10) and FAISS brute-force Hamming
range search; their per-10k time is extrapolated x10. Vectors are random but embedding-like
(low intrinsic dimension, see ``Synthetic``): uniform random 512-d vectors have no
neighbourhoods, so no approximate index beats brute force on them (docs/scale.md).
10% of the queries are planted copies (same sha256, pHash with <= 8 flipped bits, vector at
cosine ~0.95); the rest are new draws from the corpus distribution.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "scale"
DIM = 512
PER_CLUSTER = 100
LATENT, SPREAD, NOISE = 32, 0.3, 0.3
CHUNK = 50_000
LEAK_RATE = 0.1
RADIUS = 8
CANDIDATE_RADIUS = 20
SUBSET = 1000
INSERT_ITEM = (
    "INSERT INTO item (id, corpus_id, shard_id, key, uri, locator, url, caption, sha256, pixel_digest,"
    " phash, dhash, width, height, format, metadata, has_embedding, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length."""
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Synthetic:
    """Deterministic embedding-like vectors, random 64-bit hashes and digests for items 1..n.

    Vectors have low intrinsic dimension, like real image embeddings: a point of a
    ``LATENT``-dim mixture (one centre per ``PER_CLUSTER`` items) mapped into 512 dims by a
    fixed orthonormal matrix, plus isotropic noise; the 10th neighbour of a query then sits at
    cosine ~0.87.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.seed = seed
        rng = np.random.default_rng(seed)
        self.basis = np.linalg.qr(rng.standard_normal((DIM, LATENT)))[0].astype(np.float32)
        self.centers = rng.standard_normal((max(1, n // PER_CLUSTER), LATENT)).astype(np.float32)

    def sample(self, m: int, rng: np.random.Generator) -> npt.NDArray[np.float32]:
        """``m`` vectors drawn from the corpus distribution."""
        z = self.centers[rng.integers(0, len(self.centers), m)]
        z = unit(z + SPREAD * rng.standard_normal((m, LATENT), dtype=np.float32))
        return unit(
            z @ self.basis.T
            + NOISE * rng.standard_normal((m, DIM), dtype=np.float32) / np.sqrt(DIM)
        )

    def chunk(
        self, start: int, m: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], list[str]]:
        """Vectors, signed pHashes and sha256 hex of items start+1 .. start+m."""
        rng = np.random.default_rng((self.seed, start))
        vecs = self.sample(m, rng)
        hashes = rng.integers(-(2**63), 2**63 - 1, m, dtype=np.int64)
        return vecs, hashes, [rng.bytes(32).hex() for _ in range(m)]


def build_corpus(home: Path, syn: Synthetic) -> dict[str, Any]:
    """Items (bulk insert), vector batch files and their rows, as the indexer leaves them."""
    from sqlalchemy import update

    from splitaudit.indexer.db.engine import transaction
    from splitaudit.indexer.db.models import Corpus, VectorBatch
    from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
    from splitaudit.indexer.store.vectors import batch_path, write_batch
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(home)
    now = datetime.now(UTC).isoformat(sep=" ")
    with transaction(ws.sessions) as s:
        corpus = ensure_corpus(s, name="syn", model_id="synthetic-512", dim=DIM)
        corpus_id = corpus.id
        shard_id = ensure_shard(s, corpus=corpus, source="synthetic", name="all").id
    corpus_dir = ws.corpus_dir("syn")
    t0 = time.perf_counter()
    insert_s = 0.0
    for start in range(0, syn.n, CHUNK):
        m = min(CHUNK, syn.n - start)
        vecs, hashes, digests = syn.chunk(start, m)
        ids = np.arange(start + 1, start + m + 1, dtype=np.int64)
        rows = [
            (
                int(i),
                corpus_id,
                shard_id,
                f"{i:09d}",
                f"/data/shard{i // 10_000:05d}.tar#offset={i * 4096}",
                '{"kind": "none"}',
                f"https://img.example.org/{i}.jpg",
                f"synthetic caption {i}",
                d,
                d[::-1],
                int(h),
                int(h) ^ 1,
                256,
                256,
                "JPEG",
                "{}",
                1,
                now,
            )
            for i, h, d in zip(ids.tolist(), hashes.tolist(), digests, strict=True)
        ]
        t = time.perf_counter()
        with transaction(ws.sessions) as s:
            s.connection().exec_driver_sql(INSERT_ITEM, rows)  # DBAPI executemany
            name = f"syn{start:09d}"
            write_batch(batch_path(corpus_dir, name), ids, vecs)
            s.add(VectorBatch(corpus_id=corpus_id, name=name, count=m))
            s.execute(
                update(Corpus)
                .where(Corpus.id == corpus_id)
                .values(generation=Corpus.generation + 1)
            )
        insert_s += time.perf_counter() - t
    ws.close()
    return {
        "generate_and_insert_s": round(time.perf_counter() - t0, 1),
        "db_insert_s": round(insert_s, 1),
    }


def make_queries(syn: Synthetic, nq: int, seed: int = 1) -> dict[str, Any]:
    """10k audit queries: LEAK_RATE planted copies of corpus items, the rest new items."""
    rng = np.random.default_rng(seed)
    n_leak = int(nq * LEAK_RATE)
    leaked = np.sort(rng.choice(syn.n, n_leak, replace=False))  # 0-based rows
    vecs = np.empty((nq, DIM), np.float32)
    phash = rng.integers(0, 2**64 - 1, nq, dtype=np.uint64)
    sha = [rng.bytes(32).hex() for _ in range(nq)]
    for start in range(0, syn.n, CHUNK):
        lo, hi = np.searchsorted(leaked, [start, start + CHUNK])
        if hi == lo:
            continue
        cv, ch, cd = syn.chunk(start, min(CHUNK, syn.n - start))
        for j in range(lo, hi):
            r = int(leaked[j]) - start
            vecs[j] = cv[r]
            phash[j] = np.uint64(int(ch[r]) & (2**64 - 1))
            sha[j] = cd[r]
    noise = rng.standard_normal((n_leak, DIM), dtype=np.float32) / np.sqrt(DIM)
    vecs[:n_leak] = unit(vecs[:n_leak] + 0.33 * noise)
    for j in range(n_leak):
        for bit in rng.choice(64, int(rng.integers(0, RADIUS + 1)), replace=False):
            phash[j] ^= np.uint64(1) << np.uint64(int(bit))
    vecs[n_leak:] = syn.sample(nq - n_leak, rng)
    return {
        "vectors": vecs,
        "phash": phash,
        "mirror": rng.integers(0, 2**64 - 1, nq, dtype=np.uint64),
        "sha256": sha,
        "pixel": [s[::-1] for s in sha],
        "leaked_ids": leaked + 1,
    }


def exact_queries(home: Path, q: dict[str, Any]) -> dict[str, Any]:
    """The engine's exact tier (IN lookups through the DB index) and the SQLite query plan."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Item
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(home, migrate=False)
    found = 0
    t = time.perf_counter()
    with ws.sessions() as s:
        for column, values in ((Item.sha256, q["sha256"]), (Item.pixel_digest, q["pixel"])):
            for start in range(0, len(values), 500):
                found += len(
                    s.execute(
                        select(Item.id, column).where(
                            Item.corpus_id == 1, column.in_(values[start : start + 500])
                        )
                    ).all()
                )
        elapsed = time.perf_counter() - t
        stmt = select(Item.id, Item.sha256).where(
            Item.corpus_id == 1, Item.sha256.in_(q["sha256"][:3])
        )
        sql = str(stmt.compile(ws.engine, compile_kwargs={"literal_binds": True}))
        plan = [r[-1] for r in s.connection().exec_driver_sql("EXPLAIN QUERY PLAN " + sql).all()]
    ws.close()
    return {"exact_s": round(elapsed, 2), "exact_hits": found, "exact_plan": plan}


def ground_truth(
    corpus_dir: Path, home: Path, queries: npt.NDArray[np.float32], k: int
) -> tuple[Any, float]:
    """Exact top-k by numpy BLAS streamed over the batch files (the baseline), and its time."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import VectorBatch
    from splitaudit.indexer.store.calibrate import iter_chunks
    from splitaudit.indexer.store.exact import TopK
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(home, migrate=False)
    with ws.sessions() as s:
        refs = [
            (n, c)
            for n, c in s.execute(
                select(VectorBatch.name, VectorBatch.count).order_by(VectorBatch.id)
            )
        ]
    ws.close()
    t = time.perf_counter()
    top = TopK(len(queries), k)
    for ids, vecs in iter_chunks(corpus_dir, refs):
        top.update_dot(queries, vecs, ids)
    return top.result()[1], time.perf_counter() - t


def run_one(n: int, nq: int, root: Path) -> dict[str, Any]:
    """Everything for one corpus size; returns the figures."""
    from splitaudit.indexer.db.models import Corpus
    from splitaudit.indexer.store.corpus_index import sync_corpus_index
    from splitaudit.indexer.store.exact import recall_at_k
    from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS
    from splitaudit.indexer.workspace import Workspace

    home = root / f"n{n}"
    shutil.rmtree(home, ignore_errors=True)
    syn = Synthetic(n)
    out: dict[str, Any] = {"items": n, "queries": nq}
    out.update(build_corpus(home, syn))
    out["rss_after_insert_mb"] = round(peak_rss_mb())
    ws = Workspace.open(home, migrate=False)
    corpus_dir = ws.corpus_dir("syn")
    t = time.perf_counter()
    with ws.sessions() as s:
        sync_corpus_index(s, s.get_one(Corpus, 1), corpus_dir)
    out["index_build_s"] = round(time.perf_counter() - t, 1)
    out["rss_after_build_mb"] = round(peak_rss_mb())
    t = time.perf_counter()
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, 1), corpus_dir)  # up to date: mmap load
    out["index_open_s"] = round(time.perf_counter() - t, 2)
    ws.close()
    floats, hashes = index.floats, index.hashes
    assert floats is not None
    out.update(
        vector_index=floats.index_type,
        vector_params=floats.params,
        hash_index=hashes.index_type,
        hash_params=hashes.params,
    )
    sizes = {
        "embeddings.faiss": (corpus_dir / "embeddings.faiss").stat().st_size,
        "phash.faiss": (corpus_dir / "phash.faiss").stat().st_size,
        "vector batches": sum(p.stat().st_size for p in (corpus_dir / "vectors").glob("*.npz")),
        "sqlite db": sum(p.stat().st_size for p in home.glob("splitaudit.db*")),
    }
    out["disk_bytes"] = sizes
    out["bytes_per_item"] = {k: round(v / n, 1) for k, v in sizes.items()}
    if hashes.mih is not None:
        out["bytes_per_item"]["mih tables (memory)"] = round(hashes.mih.nbytes / n, 1)

    q = make_queries(syn, nq)
    out.update(exact_queries(home, q))
    t = time.perf_counter()
    near_plain = hashes.search_radius(q["phash"], RADIUS)
    near_mirror = hashes.search_radius(q["mirror"], RADIUS)
    out["near_radius_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    for h in (q["phash"], q["mirror"]):  # the engine's verification candidates
        hashes.search_knn_within(h, 10, CANDIDATE_RADIUS)
    out["near_knn_s"] = round(time.perf_counter() - t, 2)
    out["near_s"] = round(out["near_radius_s"] + out["near_knn_s"], 2)
    out["near_pairs"] = sum(len(i) for i, _ in near_plain) + sum(len(i) for i, _ in near_mirror)
    t = time.perf_counter()
    found = floats.search(q["vectors"], 10)[1]
    out["semantic_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    chunked = np.concatenate(
        [floats.search(q["vectors"][s : s + 1024], 10)[1] for s in range(0, nq, 1024)]
    )
    out["semantic_1024_chunks_s"] = round(time.perf_counter() - t, 2)
    out["chunked_agreement"] = round(recall_at_k(chunked, found), 4)
    out["audit_s"] = round(out["exact_s"] + out["near_s"] + out["semantic_s"], 2)
    out["rss_after_audit_mb"] = round(peak_rss_mb())

    sub = np.random.default_rng(2).choice(nq, min(SUBSET, nq), replace=False)
    truth, exact_s = ground_truth(corpus_dir, home, q["vectors"][sub], 10)
    out["semantic_recall_at_10"] = round(recall_at_k(found[sub], truth), 4)
    out["semantic_exact_baseline_s"] = round(exact_s * nq / len(sub), 1)
    t = time.perf_counter()
    for h in (q["phash"][sub], q["mirror"][sub]):  # candidates as searched before: exhaustive
        hashes.search_knn(h, 10)
    out["near_knn_before_s"] = round((time.perf_counter() - t) * nq / len(sub), 1)
    t = time.perf_counter()
    brute = _hamming_brute(hashes, q["phash"][sub], RADIUS)
    out["near_brute_baseline_s"] = round((time.perf_counter() - t) * 2 * nq / len(sub), 1)
    out["hamming_recall_r8"] = _pair_recall([near_plain[i] for i in sub], brute)
    wide = hashes.search_radius(q["phash"][sub], MAX_EXACT_RADIUS)
    out["hamming_recall_r11"] = _pair_recall(
        wide, _hamming_brute(hashes, q["phash"][sub], MAX_EXACT_RADIUS)
    )
    out["peak_rss_mb"] = round(peak_rss_mb())
    return out


def _hamming_brute(hashes: Any, q: npt.NDArray[np.uint64], radius: int) -> list[tuple[Any, Any]]:
    from splitaudit.indexer.store.binary_index import hashes_to_bytes

    lims, dists, ids = hashes.index.range_search(hashes_to_bytes(q), radius + 1)
    return [(ids[lims[i] : lims[i + 1]], dists[lims[i] : lims[i + 1]]) for i in range(len(q))]


def _pair_recall(found: list[tuple[Any, Any]], truth: list[tuple[Any, Any]]) -> float:
    hits = total = 0
    for (f, _), (t, _) in zip(found, truth, strict=True):
        hits += len(set(f.tolist()) & set(t.tolist()))
        total += len(t)
    return round(hits / total, 4) if total else 1.0


def report(results: list[dict[str, Any]]) -> None:
    """Print the figures, the targets and the growth / baseline ratios."""
    for r in results:
        vp = r["vector_params"]
        print(f"\n== {r['items']:,} items, {r['queries']:,} queries ==")
        print(
            f"  generate + bulk insert {r['generate_and_insert_s']} s (DB inserts {r['db_insert_s']} s); "
            f"index build {r['index_build_s']} s; open for serving {r['index_open_s']} s"
        )
        print(
            f"  vector index {r['vector_index']}"
            + (
                f": nprobe {vp['nprobe']}, calibrated recall@10 {vp['recall_at_10']}"
                if "nprobe" in vp
                else ""
            )
        )
        print(f"  hash index {r['hash_index']} {r['hash_params'] or ''}")
        print("  bytes/item: " + ", ".join(f"{k} {v}" for k, v in r["bytes_per_item"].items()))
        print(
            f"  audit: exact {r['exact_s']} s ({r['exact_hits']} hits), near {r['near_s']} s "
            f"(radius {r['near_radius_s']} s, {r['near_pairs']} pairs; 10-NN candidates {r['near_knn_s']} s), "
            f"semantic {r['semantic_s']} s -> total {r['audit_s']} s"
        )
        print(
            f"  semantic in the engine's 1024-query chunks: {r['semantic_1024_chunks_s']} s "
            f"(same top-10: {r['chunked_agreement']})"
        )
        print(f"  exact lookup plan: {r['exact_plan']}")
        print(
            f"  recall: semantic@10 {r['semantic_recall_at_10']}, Hamming<=8 {r['hamming_recall_r8']}, "
            f"Hamming<=11 {r['hamming_recall_r11']}"
        )
        print(
            f"  baselines for all queries (x from a {SUBSET}-query subset): exact vectors {r['semantic_exact_baseline_s']} s "
            f"(x{r['semantic_exact_baseline_s'] / max(r['semantic_s'], 1e-3):.1f} of ours), "
            f"brute Hamming {r['near_brute_baseline_s']} s "
            f"(x{r['near_brute_baseline_s'] / max(r['near_radius_s'], 1e-3):.1f} of our radius search), "
            f"exhaustive 10-NN candidates {r.get('near_knn_before_s')} s "
            f"(x{(r.get('near_knn_before_s') or 0) / max(r['near_knn_s'], 1e-3):.1f} of ours)"
        )
        print(
            f"  peak RSS {r['peak_rss_mb']} MiB (after insert {r['rss_after_insert_mb']}, build "
            f"{r['rss_after_build_mb']}, audit {r['rss_after_audit_mb']})"
        )
    for a, b in pairwise(results):
        f = b["items"] / a["items"]
        print(
            f"\ngrowth {a['items']:,} -> {b['items']:,} (x{f:.1f} items): "
            f"build x{b['index_build_s'] / max(a['index_build_s'], 1e-3):.1f}, "
            f"audit x{b['audit_s'] / max(a['audit_s'], 1e-3):.1f}, "
            f"semantic x{b['semantic_s'] / max(a['semantic_s'], 1e-3):.1f}, "
            f"near x{b['near_s'] / max(a['near_s'], 1e-3):.1f}, "
            f"peak RSS x{b['peak_rss_mb'] / a['peak_rss_mb']:.1f}",
            end="",
        )
    print()
    big = results[-1]
    print(
        f"\ntargets at {big['items']:,}: audit < 60 s: {big['audit_s']} s; semantic recall@10 >= 0.99: "
        f"{big['semantic_recall_at_10']}; Hamming recall >= 0.99: {big['hamming_recall_r8']}; "
        f"peak RSS < 4096 MiB: {big['peak_rss_mb']}"
    )


def main(argv: list[str] | None = None) -> None:
    """Run each size in a child process, then print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--keep", action="store_true", help="keep the generated corpora")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--report", type=Path, help="only print the figures saved by an earlier --json")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.report:
        report(json.loads(args.report.read_text()))
        return
    if args.one:
        print(json.dumps(run_one(args.one, args.queries, args.dir), default=str))
        return
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        started = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.scale",
                "--one",
                str(n),
                "--queries",
                str(args.queries),
                "--dir",
                str(args.dir),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            check=False,
        )
        if proc.returncode != 0:
            sys.exit(f"size {n} failed:\n{proc.stderr[-4000:]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"size {n:,} done in {time.perf_counter() - started:.0f} s", flush=True)
        if not args.keep:
            shutil.rmtree(args.dir / f"n{n}", ignore_errors=True)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
