"""Scale at the store level: 1M and 10M synthetic items (hashes + 512-d vectors), audited here.

Run: ``.venv/bin/python -m bench.scale_store [--sizes 1000000,10000000] [--queries 10000]``
(wrap in ``flock /tmp/heavy.lock``: 10M takes 19 GiB of batch files, a 9.6 GiB list file and
~12 GiB of RSS, of which at most 2.8 GiB anonymous, the rest memory-mapped pages; measured:
generation 15 min, build 25 min, audit + baselines 12 min on a loaded 2-core machine).
``--generate-only`` writes the corpus first (light: under 1 GB; the next run builds on it),
``--keep`` leaves the stores, ``--reuse`` audits them again in a fresh process (serving
figures), ``--no-baselines`` skips the brute-force baselines.

No database (``bench/scale.py`` does the DB rows, up to 1M): the vector batch files are
written chunk by chunk straight to disk as the indexer writes them, the hashes are kept in
memory. The stores are then built as ``sync_corpus_index`` builds them (IVF + fp16, nprobe
calibrated; on-disk lists from ``IndexPolicy.ondisk_min``; multi-index hash tables with the
candidate k-NN recall recorded), saved, and reopened for serving (memory-mapped). The audit
then runs the engine's store calls for 10,000 queries (10% planted copies: pHash <= 8 bits
away, vector at cosine ~0.95; the rest new draws): Hamming <= 8 for the plain and mirrored
pHash, the verification candidates (10 nearest within 20 bits) for both, and the vector
top-10. Wall, CPU and peak RSS per step.

Baselines in the same run, on a 1,000-query subset (times x10 for all queries): the exhaustive
FAISS k-NN the engine used for candidates before (its answers are also the truth of the
candidates' recall), FAISS brute-force range search (truth at radius 8) and exact vector
top-10 by numpy BLAS over the batch files (truth of recall@10).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.scale import CHUNK, DIM, LEAK_RATE, RADIUS, SUBSET, Synthetic, peak_rss_mb, unit

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "scale_store"
CANDIDATE_RADIUS, K = 20, 10


class Clock:
    """Wall and CPU seconds of a step."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def done(self) -> dict[str, float]:
        return {
            "wall_s": round(time.perf_counter() - self.wall, 2),
            "cpu_s": round(time.process_time() - self.cpu, 2),
        }


def generate(
    folder: Path, syn: Synthetic, nq: int, seed: int = 1, *, hashes_only: bool = False
) -> dict[str, Any]:
    """Batch files straight to disk, every hash, and the queries (planted rows captured as the
    chunks go by, so the corpus is generated once). ``hashes_only``: no vectors."""
    from splitaudit.indexer.store.vectors import batch_path, write_batch

    rng = np.random.default_rng(seed)
    n_leak = int(nq * LEAK_RATE)
    leaked = np.sort(rng.choice(syn.n, n_leak, replace=False))
    qv = np.empty((nq, DIM), np.float32)
    qh = rng.integers(0, 2**64 - 1, nq, dtype=np.uint64)
    hashes = np.empty(syn.n, np.uint64)
    refs = []
    if hashes_only:
        hashes = np.random.default_rng((seed, 7)).integers(0, 2**64 - 1, syn.n, dtype=np.uint64)
    for start in range(0, 0 if hashes_only else syn.n, CHUNK):
        m = min(CHUNK, syn.n - start)
        vecs, signed, _ = syn.chunk(start, m)
        hashes[start : start + m] = signed.view(np.uint64)
        name = f"syn{start:09d}"
        write_batch(batch_path(folder, name), np.arange(start + 1, start + m + 1), vecs)
        refs.append((name, m))
        lo, hi = np.searchsorted(leaked, [start, start + m])
        qv[lo:hi] = vecs[leaked[lo:hi] - start]
    qh[:n_leak] = hashes[leaked]
    qv[:n_leak] = unit(
        qv[:n_leak] + 0.33 * rng.standard_normal((n_leak, DIM), dtype=np.float32) / np.sqrt(DIM)
    )
    for j in range(n_leak):
        for bit in rng.choice(64, int(rng.integers(0, RADIUS + 1)), replace=False):
            qh[j] ^= np.uint64(1) << np.uint64(int(bit))
    qv[n_leak:] = syn.sample(nq - n_leak, rng)
    return {
        "refs": refs,
        "hashes": hashes,
        "vectors": qv,
        "phash": qh,
        "mirror": rng.integers(0, 2**64 - 1, nq, dtype=np.uint64),
        "n_leak": n_leak,
    }


QUERY_FILE = "queries.npz"
GENERATED_FILE = "generated.npz"  # a --generate-only corpus: queries and every hash


def save_queries(folder: Path, g: dict[str, Any], name: str = QUERY_FILE) -> None:
    """The audit's queries and the batch list, kept beside the stores (``--reuse``); with
    ``GENERATED_FILE`` the corpus hashes too."""
    names = np.asarray([name for name, _ in g["refs"]])
    sizes = np.asarray([m for _, m in g["refs"]], np.int64)
    keys = ("vectors", "phash", "mirror") + (("hashes",) if name == GENERATED_FILE else ())
    arrays = {k: g[k] for k in keys}
    np.savez(folder / name, names=names, sizes=sizes, n_leak=g["n_leak"], **arrays)


def load_queries(folder: Path, nq: int, name: str = QUERY_FILE) -> dict[str, Any]:
    """What ``save_queries`` kept; refuses a folder built for another query count."""
    path = folder / name
    if not path.exists():
        sys.exit(f"--reuse: no {path}; build the size first (with --keep)")
    with np.load(path) as data:
        g: dict[str, Any] = {k: data[k] for k in data.files if k not in ("names", "sizes")}
        g["refs"] = [(str(a), int(b)) for a, b in zip(data["names"], data["sizes"], strict=True)]
        g["n_leak"] = int(data["n_leak"])
    if len(g["vectors"]) != nq:
        sys.exit(f"--reuse: {path} holds {len(g['vectors'])} queries, not {nq}")
    return g


def run_one(
    n: int,
    nq: int,
    root: Path,
    hashes_only: bool = False,
    ondisk_min: int | None = None,
    *,
    reuse: bool = False,
    opts: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """Generate, build, reopen and audit one size (``reuse``: audit the stores an earlier
    ``--keep`` run left; ``opts["generate_only"]``: write the corpus and stop, the next run
    builds on it); returns the figures."""
    folder = root / f"n{n}"
    opts = opts or {}
    out: dict[str, Any] = {"items": n, "queries": nq, "hashes_only": hashes_only}
    if reuse:
        g = load_queries(folder, nq)
        out["reused"] = True
        return audit(out, folder, g, n, nq, opts)
    staged = folder / GENERATED_FILE
    if staged.exists() and not opts.get("generate_only"):  # a --generate-only run's corpus
        g = load_queries(folder, nq, GENERATED_FILE)
        out["generate"] = json.loads((folder / f"{GENERATED_FILE}.json").read_text())
        return build_and_audit(out, folder, g, n, nq, hashes_only, ondisk_min, opts)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    c = Clock()
    g = generate(folder, Synthetic(min(n, 1000) if hashes_only else n), nq, hashes_only=hashes_only)
    if hashes_only:
        g["hashes"] = np.random.default_rng(7).integers(0, 2**64 - 1, n, dtype=np.uint64)
        leaked = np.random.default_rng(8).choice(n, g["n_leak"], replace=False)
        planted = g["hashes"][leaked]
        for j in range(len(planted)):  # <= 8 flipped bits, as generate() does
            for bit in np.random.default_rng(j).choice(64, j % (RADIUS + 1), replace=False):
                planted[j] ^= np.uint64(1) << np.uint64(int(bit))
        g["phash"][: g["n_leak"]] = planted
    out["generate"] = c.done()
    if opts.get("generate_only"):
        save_queries(folder, g, GENERATED_FILE)
        (folder / f"{GENERATED_FILE}.json").write_text(json.dumps(out["generate"]))
        return out
    return build_and_audit(out, folder, g, n, nq, hashes_only, ondisk_min, opts)


def build_and_audit(
    out: dict[str, Any],
    folder: Path,
    g: dict[str, Any],
    n: int,
    nq: int,
    hashes_only: bool,
    ondisk_min: int | None,
    opts: dict[str, bool],
) -> dict[str, Any]:
    """Build the stores over a generated corpus, save them, then ``audit``."""
    from splitaudit.indexer.store import corpus_index
    from splitaudit.indexer.store.binary_index import BinaryStore
    from splitaudit.indexer.store.float_build import build_ivf
    from splitaudit.indexer.store.policy import IndexPolicy

    policy = IndexPolicy() if ondisk_min is None else IndexPolicy(ondisk_min=ondisk_min)
    c = Clock()
    hashes = BinaryStore.create()
    hashes.add(np.arange(1, n + 1, dtype=np.int64), g["hashes"])
    corpus_index._retype_hashes(hashes, policy)
    hashes.save(folder, generation=1, max_item_id=n)
    out["hash_build"] = c.done()
    c = Clock()
    floats: Any = None
    if not hashes_only:
        floats = build_ivf(
            folder, g["refs"], model_id="syn", dim=DIM, storage="fp16", policy=policy
        )
        floats.save(folder, generation=1, last_batch_id=1)
    out["vector_build"] = c.done()
    out["rss_after_build_mb"] = round(peak_rss_mb())
    out["rss_built_mb"] = current_rss_mb()
    del floats, hashes
    save_queries(folder, g)
    return audit(out, folder, g, n, nq, opts)


def audit(
    out: dict[str, Any], folder: Path, g: dict[str, Any], n: int, nq: int, opts: dict[str, bool]
) -> dict[str, Any]:
    """Reopen the saved stores for serving, run the audit's store calls and (``opts``
    ``baselines``, default on) the baselines; ``chunks_1024``: the vector search again in
    chunks of 1,024 queries (FAISS's own search)."""
    from splitaudit.indexer.store.binary_index import BinaryStore
    from splitaudit.indexer.store.calibrate import knn_within_recall
    from splitaudit.indexer.store.exact import recall_at_k
    from splitaudit.indexer.store.float_index import FloatStore

    hashes_only = out["hashes_only"]
    floats: Any = None
    c = Clock()
    hashes = BinaryStore.load(folder)
    if not hashes_only:
        floats = FloatStore.load(folder, model_id="syn", dim=DIM, mmap=True)
    out["open"] = c.done()
    out["rss_open_mb"] = current_rss_mb()
    out.update(
        vector_index=floats.index_type if floats else None,
        vector_params={k: v for k, v in floats.params.items() if k != "nprobe_curve"}
        if floats
        else {},
        hash_index=hashes.index_type,
        hash_params=hashes.params,
        disk_bytes={p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()},
        batch_bytes=sum(p.stat().st_size for p in (folder / "vectors").glob("*.npz")),
    )
    if hashes.mih is not None:
        out["mih_bytes"] = hashes.mih.nbytes

    audit = Clock()
    c = Clock()
    near = [hashes.search_radius(g[o], RADIUS) for o in ("phash", "mirror")]
    out["near_r8"] = c.done()
    c = Clock()
    cand = [hashes.search_knn_within(g[o], K, CANDIDATE_RADIUS) for o in ("phash", "mirror")]
    out["candidates"] = c.done()
    c = Clock()
    found = floats.search(g["vectors"], K)[1] if floats else None
    out["semantic"] = c.done()
    out["audit"] = audit.done()
    out["rss_audit_mb"] = current_rss_mb()  # now, not peak: what serving holds (mapped pages too)
    out["candidates_per_query"] = round(float((cand[0][1] >= 0).sum(axis=1).mean()), 2)
    if floats and opts.get("chunks_1024"):
        c = Clock()
        chunked = np.concatenate(
            [floats.search(g["vectors"][s : s + 1024], K)[1] for s in range(0, nq, 1024)]
        )
        out["semantic_1024_chunks"] = c.done()
        out["chunked_agreement"] = round(recall_at_k(chunked, found), 4)
    out["rss_after_audit_mb"] = round(peak_rss_mb())
    # the figures so far, in case the (long) baselines do not get to finish
    (folder / "figures.partial.json").write_text(json.dumps(out, default=str))
    if not opts.get("baselines", True):
        out["peak_rss_mb"] = round(peak_rss_mb())
        return out

    # baselines on a subset of the queries (planted ones included in proportion)
    sub = np.sort(np.random.default_rng(2).choice(nq, min(SUBSET, nq), replace=False))
    scale = nq / len(sub)
    flat = BinaryStore(hashes.index)  # no tables: the exhaustive search used before
    c = Clock()
    before = [flat.search_knn_within(g[o][sub], K, CANDIDATE_RADIUS) for o in ("phash", "mirror")]
    b = c.done()
    out["candidates_per_query_before"] = round(float((before[0][1] >= 0).sum(axis=1).mean()), 2)
    out["candidates_before_x"] = {k: round(v * scale, 1) for k, v in b.items()}
    planted = sub < g["n_leak"]
    for name, rows in (("all", slice(None)), ("planted", planted), ("new", ~planted)):
        at_k, at_1 = knn_within_recall(
            (cand[0][0][sub][rows], cand[0][1][sub][rows]), (before[0][0][rows], before[0][1][rows])
        )
        out[f"candidate_recall_{name}"] = {"at_10": round(at_k, 4), "at_1": round(at_1, 4)}
    c = Clock()
    lims, _, ids = hashes.index.range_search(
        hashes_bytes(g["phash"][sub]), RADIUS + 1
    )  # radius search is exclusive
    out["near_r8_brute_x"] = {k: round(v * scale * 2, 1) for k, v in c.done().items()}
    out["by_radius"] = structures_by_radius(hashes, g["phash"][sub], scale)
    hits = total = 0
    for r, i in enumerate(sub.tolist()):
        within = set(ids[lims[r] : lims[r + 1]].tolist())
        hits += len(within & set(near[0][i][0].tolist()))
        total += len(within)
    out["hamming_recall_r8"] = round(hits / total, 4) if total else 1.0
    if floats and found is not None:
        c = Clock()
        truth = exact_top_k(folder, g["refs"], g["vectors"][sub], K)
        e = c.done()
        out["semantic_exact_baseline_x"] = {k: round(v * scale, 1) for k, v in e.items()}
        out["semantic_recall_at_10"] = round(recall_at_k(found[sub], truth), 4)
    out["peak_rss_mb"] = round(peak_rss_mb())
    return out


def structures_by_radius(hashes: Any, q: npt.NDArray[np.uint64], scale: float) -> dict[str, Any]:
    """Per radius, what multi-index hashing (exact up to ``MAX_EXACT_RADIUS``) costs for the
    radius search and the k nearest within the radius, CPU-s per audit (x ``scale``, both pHash
    orientations), to set beside FAISS brute force on the same queries (``near_r8_brute_x``,
    ``candidates_before_x``: one exhaustive scan costs the same at any radius)."""
    from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS

    def per_audit(clock: Clock) -> float:
        return round(clock.done()["cpu_s"] * scale * 2, 2)

    out: dict[str, Any] = {}
    for radius in (4, RADIUS, MAX_EXACT_RADIUS):
        if hashes.mih is None:
            break
        c = Clock()
        found = hashes.mih.search_radius(q, radius)
        row: dict[str, Any] = {"mih_radius_cpu_s": per_audit(c)}
        row["hits_per_query"] = round(sum(len(i) for i, _ in found) / len(q), 2)
        c = Clock()
        hashes.mih.search_knn_within(q, K, radius)
        row["mih_knn_cpu_s"] = per_audit(c)
        out[str(radius)] = row
    lims = hashes.index.range_search(hashes_bytes(q), CANDIDATE_RADIUS + 1)[0]
    out[str(CANDIDATE_RADIUS)] = {"hits_per_query": round(float(lims[-1]) / len(q), 2)}
    return out


def current_rss_mb() -> dict[str, float]:
    """Resident memory of this process now (MiB): all, anonymous (heap), and file-backed
    (memory-mapped index files: page cache the kernel can drop and processes share)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = round(int(line.split()[1]) / 1024)
    return out


def hashes_bytes(q: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    from splitaudit.indexer.store.binary_index import hashes_to_bytes

    return hashes_to_bytes(q)


def exact_top_k(
    folder: Path, refs: list[tuple[str, int]], queries: npt.NDArray[np.float32], k: int
) -> npt.NDArray[np.int64]:
    """Exact top-k by numpy BLAS streamed over the batch files."""
    from splitaudit.indexer.store.calibrate import iter_chunks
    from splitaudit.indexer.store.exact import TopK

    top = TopK(len(queries), k)
    for ids, vecs in iter_chunks(folder, refs):
        top.update_dot(queries, vecs, ids)
    return top.result()[1]


def report(results: list[dict[str, Any]]) -> None:
    """Print the figures and the ratios against the same-run baselines."""
    for r in results:
        kind = "hashes only" if r.get("hashes_only") else "hashes + vectors"
        print(f"\n== {r['items']:,} items, {r['queries']:,} queries (store level, {kind}) ==")
        if r.get("reused"):
            print(f"  stores of an earlier run reused (no build); open {r['open']['wall_s']} s")
        else:
            print(
                f"  generate {r['generate']['wall_s']} s; build: hashes {r['hash_build']['wall_s']}"
                f" s, vectors {r['vector_build']['wall_s']} s (CPU {r['vector_build']['cpu_s']} s);"
                f" open {r['open']['wall_s']} s; peak RSS after build {r['rss_after_build_mb']} MiB"
            )
        vp = r["vector_params"]
        if vp:
            print(
                f"  vectors {r['vector_index']} nprobe {vp.get('nprobe')} (calibrated recall@10 "
                f"{vp.get('recall_at_10')}), on-disk lists: {vp.get('ivfdata') or 'no'}"
            )
        hp = r["hash_params"]
        print(
            f"  hashes {r['hash_index']}: candidates exact within {hp.get('knn_exact_radius')} bits,"
            f" sidecar knn recall {hp.get('knn_recall')} (nearest {hp.get('knn_recall_at_1')});"
            f" tables {r.get('mih_bytes', 0) / 2**20:.0f} MiB in memory"
        )
        print(
            "  disk: " + ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in r["disk_bytes"].items())
        )
        print(f"  vector batch files {r['batch_bytes'] / 2**30:.1f} GiB")
        a = r["audit"]
        print(
            f"  audit (store calls): {a['wall_s']} s wall, {a['cpu_s']} CPU-s = near r8 "
            f"{r['near_r8']['wall_s']} + candidates {r['candidates']['wall_s']} + semantic "
            f"{r['semantic']['wall_s']}"
        )
        if "semantic_1024_chunks" in r:
            print(
                f"  semantic in 1024-query chunks {r['semantic_1024_chunks']['wall_s']} s "
                f"(agreement {r['chunked_agreement']})"
            )
        if "candidates_before_x" not in r:
            print(
                f"  (no baselines) peak RSS {r['peak_rss_mb']} MiB; RSS after {r['rss_audit_mb']}"
            )
            continue
        b = r["candidates_before_x"]
        print(
            f"  candidates before (exhaustive k-NN, x from {SUBSET} queries): {b['wall_s']} s wall,"
            f" {b['cpu_s']} CPU-s -> x{b['cpu_s'] / max(r['candidates']['cpu_s'], 1e-3):.1f} CPU;"
            f" candidates per query {r.get('candidates_per_query_before')} -> {r.get('candidates_per_query')}"
        )
        before_audit = a["cpu_s"] - r["candidates"]["cpu_s"] + b["cpu_s"]
        print(
            f"  audit CPU before {before_audit:.1f} s -> after {a['cpu_s']} s "
            f"(x{before_audit / max(a['cpu_s'], 1e-3):.1f})"
        )
        print(
            f"  recall: vectors@10 {r.get('semantic_recall_at_10')}, Hamming<=8 "
            f"{r['hamming_recall_r8']}, candidates vs exhaustive 10-NN within 20 bits: all "
            f"{r['candidate_recall_all']}, planted {r['candidate_recall_planted']}, new "
            f"{r['candidate_recall_new']}"
        )
        if "by_radius" in r:
            br = r["by_radius"]
            print(
                f"  by radius, CPU-s per audit (x from {SUBSET} queries): brute force (any radius)"
                f" range {r['near_r8_brute_x']['cpu_s']}, 10-NN {b['cpu_s']}; multi-index hashing:"
            )
            for radius, row in br.items():
                if isinstance(row, dict):
                    print(f"    r {radius}: {row}")
        if "semantic_exact_baseline_x" in r:
            e = r["semantic_exact_baseline_x"]
            print(f"  exact vector baseline (x): {e['wall_s']} s wall, {e['cpu_s']} CPU-s")
        print(
            f"  peak RSS {r['peak_rss_mb']} MiB (after audit {r['rss_after_audit_mb']}); RSS now: "
            f"opened {r.get('rss_open_mb')} MiB, after the audit {r.get('rss_audit_mb')} MiB"
        )


def main(argv: list[str] | None = None) -> None:
    """Run each size in a child process, then print the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument(
        "--reuse", action="store_true", help="audit the stores a --keep run left (no rebuild)"
    )
    ap.add_argument("--hashes-only", action="store_true", help="no vectors: the hash store only")
    ap.add_argument(
        "--ondisk-min", type=int, help="IndexPolicy.ondisk_min (on-disk IVF lists from)"
    )
    ap.add_argument(
        "--no-baselines", action="store_true", help="the audit's store calls only (no brute force)"
    )
    ap.add_argument(
        "--chunks-1024", action="store_true", help="also the vector search in 1,024-query chunks"
    )
    ap.add_argument(
        "--generate-only",
        action="store_true",
        help="write the corpus and stop (light: no lock needed); the next run builds on it",
    )
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--report", type=Path, help="only print the figures of an earlier --json")
    args = ap.parse_args(argv)
    if args.report:
        report(json.loads(args.report.read_text()))
        return
    if args.one:
        figures = run_one(
            args.one,
            args.queries,
            args.dir,
            args.hashes_only,
            args.ondisk_min,
            reuse=args.reuse,
            opts={
                "baselines": not args.no_baselines,
                "chunks_1024": args.chunks_1024,
                "generate_only": args.generate_only,
            },
        )
        print(json.dumps(figures, default=str))
        return
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        cmd = [sys.executable, "-m", "bench.scale_store", "--one", str(n)]
        cmd += ["--queries", str(args.queries), "--dir", str(args.dir)]
        cmd += ["--hashes-only"] if args.hashes_only else []
        cmd += ["--ondisk-min", str(args.ondisk_min)] if args.ondisk_min else []
        cmd += ["--reuse"] if args.reuse else []
        cmd += ["--no-baselines"] if args.no_baselines else []
        cmd += ["--chunks-1024"] if args.chunks_1024 else []
        cmd += ["--generate-only"] if args.generate_only else []
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"size {n} failed:\n{proc.stderr[-4000:]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str))
        if not (args.keep or args.reuse or args.generate_only):
            shutil.rmtree(args.dir / f"n{n}", ignore_errors=True)
    if not args.generate_only:
        report(results)


if __name__ == "__main__":
    main()
