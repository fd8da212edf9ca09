"""Dedup at scale and on photos: wall time, peak RSS and pair precision / recall against planted truth.

Run: ``.venv/bin/python -m bench.dedup [--sizes 100000,1000000] [--photos 1000] [--dir bench/.cache/dedup]``

*Store level* (``--sizes``): a synthetic corpus of N items written as the indexer leaves it
(DB rows bulk-inserted, vector batch files; no pixels), with planted clusters: ``RATE`` of the
items are copies (1-3 per original; a fifth of them byte-exact, the others with 0-6 flipped
pHash bits and an embedding at cosine ~0.96); every item 256 px square, or ``--side`` px (32:
a corpus of thumbnails, whose items get a dedup's ``DEDUP_SMALL_TOP_K`` embedding candidates, and
whose near pairs need pixels, so only exact copies are found without them). Singletons are random 64-bit pHashes and random
64-d unit vectors (unrelated pairs stay below cosine ~0.6 even among a million). Each size is
built in one child process and deduplicated in another, so the peak RSS is the dedup's own.
There are no pixels, so the pixel verifier cannot run: pairs are decided by digests, pHash
radius and cosine, as for a corpus whose sources are gone. Baseline, in the same run, at the
smallest size: the exhaustive vector join (every pair at the floor cosine) and FAISS's
exhaustive Hamming range search (every pHash pair within the radius, plain and mirrored),
each compared pair by pair with the self-joins dedup ran (missed / false pairs).

*Photos* (``--photos M``, ``bench.dedup_photos``): M originals (textured tiles of the offline
photos) with planted copies, ~2M files, deduplicated by ``splitaudit index`` + ``dedup`` (with
and without embeddings), imagededup's PHash ``find_duplicates`` (max distance 10) and fastdup's
connected components, each as its own process on the same files (wall, CPU, peak RSS).

Runs over ~4 GB (3M items) belong under ``flock /tmp/heavy.lock`` on a shared machine.

``--before PATH`` also deduplicates every size with another checkout of the library (e.g.
``git archive HEAD | tar -x -C /tmp/before`` before a change), alternating with the current
one on the same built corpus, and prints both and their ratio: a same-run before / after.

Pair precision / recall: every pair of items inside a found cluster against every pair inside
a planted cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.library import use_library

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "dedup"
DIM = 64
RATE = 0.05  # fraction of items that are planted copies
EXACT_SHARE = 0.2
SIDE = 256  # items' width and height (``--side``)
CHUNK = 50_000
INSERT_ITEM = (
    "INSERT INTO item (id, corpus_id, shard_id, key, uri, locator, url, caption, sha256, pixel_digest,"
    " phash, dhash, width, height, format, metadata, has_embedding, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def corpus_home(folder: Path, n: int, side: int) -> Path:
    """Where the corpus of ``n`` items of ``side`` pixels is built under ``folder``."""
    return folder / (f"n{n}" if side == SIDE else f"n{n}-side{side}")


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def unit(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length."""
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def plan(n: int, seed: int = 0) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int8]]:
    """Per item (0-based): its planted cluster (-1 = singleton) and its member number (0 = original)."""
    rng = np.random.default_rng(seed)
    sizes: list[int] = []
    copies = 0
    while copies < RATE * n:
        c = int(rng.integers(1, 4))
        sizes.append(c + 1)
        copies += c
    cluster = np.full(n, -1, np.int32)
    member = np.zeros(n, np.int8)
    slots = rng.permutation(n)[: sum(sizes)]
    pos = 0
    for k, size in enumerate(sizes):
        cluster[slots[pos : pos + size]] = k
        member[slots[pos : pos + size]] = np.arange(size)
        pos += size
    return cluster, member


def truth_pairs(cluster: npt.NDArray[np.int32]) -> set[tuple[int, int]]:
    """Every pair of item ids (1-based, a < b) inside a planted cluster."""
    groups: dict[int, list[int]] = {}
    for i in np.flatnonzero(cluster >= 0).tolist():
        groups.setdefault(int(cluster[i]), []).append(i + 1)
    return {(a, b) for g in groups.values() for x, a in enumerate(g) for b in g[x + 1 :]}


def build(n: int, home: Path, seed: int = 0, side: int = SIDE) -> dict[str, Any]:
    """Write the synthetic corpus (items, vector batches) as the indexer leaves it; every
    item ``side`` x ``side`` pixels (under the thresholds' ``small_side``: a thumbnail corpus,
    whose items get the audit's wider embedding candidates)."""
    from sqlalchemy import update

    from splitaudit.indexer.db.engine import transaction
    from splitaudit.indexer.db.models import Corpus, VectorBatch
    from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
    from splitaudit.indexer.store.vectors import batch_path, write_batch
    from splitaudit.indexer.workspace import Workspace

    cluster, member = plan(n, seed)
    k = int(cluster.max()) + 1
    rng = np.random.default_rng((seed, 1))
    base_vecs = unit(rng.standard_normal((k, DIM), dtype=np.float32))
    base_hash = rng.integers(-(2**63), 2**63 - 1, k, dtype=np.int64)
    base_sha = [rng.bytes(32).hex() for _ in range(k)]
    ws = Workspace.open(home)
    with transaction(ws.sessions) as s:
        corpus = ensure_corpus(s, name="syn", model_id="synthetic-64", dim=DIM)
        corpus_id, shard_id = (
            corpus.id,
            ensure_shard(s, corpus=corpus, source="synthetic", name="all").id,
        )
    now = datetime.now(UTC).isoformat(sep=" ")
    t0 = time.perf_counter()
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        crng = np.random.default_rng((seed, 2, start))
        vecs = unit(crng.standard_normal((m, DIM), dtype=np.float32))
        hashes = crng.integers(-(2**63), 2**63 - 1, m, dtype=np.int64)
        shas = [crng.bytes(32).hex() for _ in range(m)]
        for r in np.flatnonzero(cluster[start : start + m] >= 0).tolist():
            c, mem = int(cluster[start + r]), int(member[start + r])
            exact = mem > 0 and crng.random() < EXACT_SHARE
            if mem == 0 or exact:
                vecs[r], hashes[r], shas[r] = base_vecs[c], base_hash[c], base_sha[c]
                continue
            noise = crng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
            vecs[r] = unit((base_vecs[c] + 0.3 * noise)[None])[0]
            h = int(base_hash[c]) & (2**64 - 1)
            for bit in crng.choice(64, int(crng.integers(0, 7)), replace=False).tolist():
                h ^= 1 << bit
            hashes[r] = np.int64(h - 2**64 if h >= 2**63 else h)
        ids = np.arange(start + 1, start + m + 1, dtype=np.int64)
        rows = [
            (
                int(i),
                corpus_id,
                shard_id,
                f"{i:09d}",
                f"synthetic://{i}",
                '{"kind": "none"}',
                f"https://img.example.org/{i}.jpg",
                None,
                d,
                d[::-1],
                int(h),
                0,
                side,
                side,
                "JPEG",
                "{}",
                1,
                now,
            )
            for i, h, d in zip(ids.tolist(), hashes.tolist(), shas, strict=True)
        ]
        with transaction(ws.sessions) as s:
            s.connection().exec_driver_sql(INSERT_ITEM, rows)
            name = f"syn{start:09d}"
            write_batch(batch_path(ws.corpus_dir("syn"), name), ids, vecs)
            s.add(VectorBatch(corpus_id=corpus_id, name=name, count=m))
            s.execute(
                update(Corpus)
                .where(Corpus.id == corpus_id)
                .values(generation=Corpus.generation + 1)
            )
    ws.close()
    return {
        "items": n,
        "side": side,
        "planted_clusters": k,
        "planted_copies": int((member > 0).sum()),
        "build_s": round(time.perf_counter() - t0, 1),
    }


def found_pairs(session: Any, run_id: int) -> set[tuple[int, int]]:
    """Every pair of item ids inside a found (non-semantic) cluster."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import DedupMember

    groups: dict[int, list[int]] = {}
    for c, i in session.execute(
        select(DedupMember.cluster, DedupMember.item_id).where(
            DedupMember.run_id == run_id, DedupMember.semantic.is_(False)
        )
    ):
        groups.setdefault(int(c), []).append(int(i))
    return {
        (min(a, b), max(a, b)) for g in groups.values() for x, a in enumerate(g) for b in g[x + 1 :]
    }


def precision_recall(found: set[tuple[int, int]], truth: set[tuple[Any, Any]]) -> dict[str, float]:
    """Pair precision and recall."""
    hits = len(found & truth)
    return {
        "pair_precision": round(hits / len(found), 4) if found else 1.0,
        "pair_recall": round(hits / len(truth), 4) if truth else 1.0,
        "found_pairs": len(found),
        "true_pairs": len(truth),
    }


def join_baseline(ws: Any, index: Any) -> dict[str, Any]:
    """Same-run brute force against the self-joins: every pair at the floor cosine (exhaustive
    vector join) and every pHash pair within the radius, plain and mirrored (FAISS exhaustive
    range search), compared with what the joins found."""
    from splitaudit.indexer.dedup.pairs import MIRROR_MASK, vector_batches
    from splitaudit.indexer.match.thresholds import thresholds_for_model
    from splitaudit.indexer.store.binary_index import hashes_to_bytes
    from splitaudit.indexer.store.calibrate import iter_chunks
    from splitaudit.indexer.store.hamming_join import HammingJoin
    from splitaudit.indexer.store.vector_join import exact_join, self_join

    th = thresholds_for_model("synthetic-64")
    floor = min(th.semantic_cosine, th.near_cosine, th.candidate_cosine)
    with ws.sessions() as s:
        refs = vector_batches(s, 1)
    out: dict[str, Any] = {}

    def pairs(table: Any, at: float | None = None) -> set[tuple[int, int]]:
        q = np.repeat(table.keys, np.diff(table.offsets))
        keep = (q != table.ids) & (table.scores >= at if at is not None else True)
        return {
            (min(a, b), max(a, b))
            for a, b in zip(q[keep].tolist(), table.ids[keep].tolist(), strict=True)
        }

    t, cpu = time.perf_counter(), time.process_time()
    joined, report = self_join(
        index.floats,
        lambda: iter_chunks(ws.corpus_dir("syn"), refs),
        k=10,
        floor=floor,
        cosine=th.near_cosine,
    )
    out["join_vectors"] = {
        **report.to_dict(),
        "s": round(time.perf_counter() - t, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }
    t, cpu = time.perf_counter(), time.process_time()
    base, ids = index.floats.vectors_view() if index.floats.is_exact else (None, None)
    if base is None:
        ids_l, vec_l = zip(*iter_chunks(ws.corpus_dir("syn"), refs), strict=True)
        ids, base = np.concatenate(ids_l), np.concatenate(vec_l)
    brute = exact_join(ids, base, iter_chunks(ws.corpus_dir("syn"), refs), k=10, floor=floor)
    out["brute_vectors"] = {
        "s": round(time.perf_counter() - t, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }
    for name, at in (("floor", floor), ("near_cosine", th.near_cosine)):
        want, got = pairs(brute, at), pairs(joined, at)
        out[f"vector_pairs_at_{name}"] = {
            "brute": len(want),
            "join": len(got),
            "missed": len(want - got),
            "false": len(got - want),
        }
    codes, hids = index.hashes.codes_and_ids()
    t, cpu = time.perf_counter(), time.process_time()
    table = HammingJoin(index.hashes).radius(np.r_[codes, codes ^ MIRROR_MASK], th.phash_hamming)
    out["join_hashes"] = {
        "s": round(time.perf_counter() - t, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }
    try:  # the mirrored stand-ins self-joined too (a library that has radius(mirror=))
        t, cpu = time.perf_counter(), time.process_time()
        both = HammingJoin(index.hashes).radius(
            np.r_[codes, codes ^ MIRROR_MASK], th.phash_hamming, mirror=int(MIRROR_MASK)
        )
        out["join_hashes_mirror"] = {
            "s": round(time.perf_counter() - t, 2),
            "cpu_s": round(time.process_time() - cpu, 2),
            "same_table": bool(
                np.array_equal(both.keys, table.keys)
                and np.array_equal(both.offsets, table.offsets)
                and np.array_equal(both.ids, table.ids)
            ),
        }
    except TypeError:
        pass
    t, cpu = time.perf_counter(), time.process_time()
    by_hash: dict[int, list[int]] = {}
    for h, i in zip(codes.view(np.int64).tolist(), hids.tolist(), strict=True):
        by_hash.setdefault(h, []).append(i)
    want = set()
    for queries in (codes, codes ^ MIRROR_MASK):
        lims, _d, found = index.hashes.index.range_search(
            hashes_to_bytes(queries), th.phash_hamming + 1
        )
        for r in range(len(queries)):
            for j in found[lims[r] : lims[r + 1]].tolist():
                if j != hids[r]:
                    want.add((min(int(hids[r]), j), max(int(hids[r]), j)))
    out["brute_hashes"] = {
        "s": round(time.perf_counter() - t, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }
    got = set()
    keys = np.repeat(table.keys, np.diff(table.offsets))
    for h, j in zip(keys.tolist(), table.ids.tolist(), strict=True):
        for i in by_hash.get(h, []):
            if i != j:
                got.add((min(i, j), max(i, j)))
    mirrored = {}
    for h, i in zip((codes ^ MIRROR_MASK).view(np.int64).tolist(), hids.tolist(), strict=True):
        mirrored.setdefault(h, []).append(i)
    for h, j in zip(keys.tolist(), table.ids.tolist(), strict=True):
        for i in mirrored.get(h, []):
            if i != j:
                got.add((min(i, j), max(i, j)))
    out["hash_pairs"] = {
        "brute": len(want),
        "join": len(got),
        "missed": len(want - got),
        "false": len(got - want),
    }
    return out


def hash_collisions(index: Any, pairs: set[tuple[int, int]]) -> int:
    """How many of ``pairs`` have pHashes within 8 bits (plain or mirrored): random 64-bit
    hashes that collide, which the near tier's radius calls duplicates by definition."""
    from splitaudit.indexer.dedup.pairs import MIRROR_MASK

    codes, ids = index.hashes.codes_and_ids()
    by_id = dict(zip(ids.tolist(), codes.tolist(), strict=True))
    hits = 0
    for a, b in pairs:
        ha, hb = np.uint64(by_id[a]), np.uint64(by_id[b])
        near = min(int(np.bitwise_count(ha ^ hb)), int(np.bitwise_count((ha ^ MIRROR_MASK) ^ hb)))
        near = min(near, int(np.bitwise_count((hb ^ MIRROR_MASK) ^ ha)))
        hits += near <= 8
    return hits


def dedup_one(n: int, home: Path, baseline: bool = False) -> dict[str, Any]:
    """Open the index (built and timed separately), dedup, score; in its own process."""
    from splitaudit.indexer.db.models import Corpus
    from splitaudit.indexer.dedup.service import create_dedup, run_dedup
    from splitaudit.indexer.store.corpus_index import sync_corpus_index
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(home, migrate=False)
    out: dict[str, Any] = {}
    t = time.perf_counter()
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, 1), ws.corpus_dir("syn"))
    out["index_build_s"] = round(time.perf_counter() - t, 1)
    assert index.floats is not None
    out["vector_index"], out["hash_index"] = index.floats.index_type, index.hashes.index_type
    out["rss_before_dedup_mb"] = round(peak_rss_mb())
    run_id = create_dedup(ws, corpus="syn")
    joins: list[str] = []

    class _Joins(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "self-join" in record.getMessage():
                joins.append(record.getMessage())
            if isinstance(record.args, tuple) and record.args:
                if "CPU by phase" in str(record.msg):
                    out["phases"] = record.args[-1]
                elif "self-joins" in str(record.msg):
                    out["summary_joins"] = record.args[-1]

    for name in ("splitaudit.indexer.dedup.service", "splitaudit.indexer.store.vector_join"):
        logging.getLogger(name).addHandler(_Joins())
        logging.getLogger(name).setLevel(logging.INFO)
    t, cpu = time.perf_counter(), time.process_time()
    summary = run_dedup(ws, run_id)
    out["dedup_s"] = round(time.perf_counter() - t, 1)
    out["dedup_cpu_s"] = round(time.process_time() - cpu, 1)  # wall time on a shared machine varies
    out["peak_rss_mb"] = round(peak_rss_mb())
    out["summary"] = summary
    out["joins"] = joins
    cluster, _member = plan(n)
    with ws.sessions() as s:
        found = found_pairs(s, run_id)
    truth = truth_pairs(cluster)
    out.update(precision_recall(found, truth))
    out["false_pairs_within_radius"] = hash_collisions(index, found - truth)
    if baseline:
        out["baseline"] = join_baseline(ws, index)
    ws.close()
    return out


def _child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.dedup", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"bench.dedup {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def report(results: list[dict[str, Any]]) -> None:
    """Print the store-level table with the growth of wall and CPU time against the smallest
    size, as a ratio and an exponent (wall time on a shared machine varies: read the CPU columns)."""
    print(
        f"\n{'items':>10} {'copies':>7} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>12}"
        f" {'precision':>9} {'recall':>7} {'wall x':>7} {'CPU x':>6} {'wall exp':>8} {'CPU exp':>7}"
    )
    first = results[0]
    for r in results:
        scale = np.log(r["items"] / first["items"])
        wall_x, cpu_x = r["dedup_s"] / first["dedup_s"], r["dedup_cpu_s"] / first["dedup_cpu_s"]
        wall_exp = np.log(wall_x) / scale if scale else float("nan")
        cpu_exp = np.log(cpu_x) / scale if scale else float("nan")
        print(
            f"{r['items']:>10,} {r['planted_copies']:>7,} {r['dedup_s']:>7} {r['dedup_cpu_s']:>7} "
            f"{r['peak_rss_mb']:>12} {r['pair_precision']:>9} {r['pair_recall']:>7} "
            f"{wall_x:>7.2f} {cpu_x:>6.2f} {wall_exp:>8.2f} {cpu_exp:>7.2f}"
        )
    for r in results:
        if len(r.get("cpu_runs", [])) > 1:
            runs = ", ".join(str(c) for c in r["cpu_runs"])
            print(f"{r['items']:>10,}: CPU s of each run {runs} (the median's shown)")
    for r in results:
        if "baseline" in r:
            print(f"\nbrute force at {r['items']:,} items (same run):")
            for key, value in r["baseline"].items():
                print(f"  {key}: {value}")


def phase_cpu(result: dict[str, Any]) -> dict[str, float]:
    """CPU seconds per dedup phase (the vector join split into its cells / calibrate / join steps)."""
    phases = {name: float(v["cpu_s"]) for name, v in result.get("phases", {}).items()}
    steps = result.get("summary_joins", {}).get("vector_join", {}).get("cpu_s", {})
    if steps and "vector_join" in phases:
        rest = phases.pop("vector_join") - sum(steps.values())
        phases.update({f"vector_{k}": float(v) for k, v in steps.items()})
        phases["vector_other"] = rest
    return phases


def report_phases(results: list[dict[str, Any]]) -> None:
    """Print each phase's CPU seconds at every size and its growth against the smallest size."""
    cpu = [phase_cpu(r) for r in results]
    if not cpu[0]:
        return
    names = list(dict.fromkeys(k for c in cpu for k in c))
    head = "".join(f" {r['items']:>12,}" for r in results)
    grow = "".join(f" {'x ' + format(r['items'], ','):>12}" for r in results[1:])
    print(f"\n{'phase (CPU s)':<20}{head}{grow}")
    for name in [*names, "total"]:
        vals = [sum(c.values()) if name == "total" else c.get(name, 0.0) for c in cpu]
        ratios = "".join(
            f" {v / vals[0]:>12.1f}" if vals[0] > 0.05 else f" {'-':>12}" for v in vals[1:]
        )
        print(f"{name:<20}" + "".join(f" {v:>12.2f}" for v in vals) + ratios)


def join_work(result: dict[str, Any]) -> dict[str, float] | None:
    """The cell-by-cell vector join's work per item (None for an exhaustive or no join): cells
    probed, vectors scored, centroids scored by the coarse step (every cell, or the two-level
    step's width) and their sum, the dot products per item that set the join's CPU."""
    vj = result.get("summary_joins", {}).get("vector_join", {})
    if vj.get("method") != "ivf" or vj.get("scored_per_item") is None:
        return None
    coarse = float((vj.get("coarse") or {}).get("width") or vj["nlist"])
    scored = float(vj["scored_per_item"])
    return {
        "cells": float(vj["nlist"]),
        "probes": float(vj.get("probes_per_item") or 0.0),
        "scored": scored,
        "coarse": coarse,
        "dots": coarse + scored,
    }


def report_join(results: list[dict[str, Any]]) -> None:
    """Print the vector join's work per item at every size and its growth against the smallest
    (at a fixed cost per dot product, the join's CPU per item grows as ``dots``)."""
    work = [(r["items"], join_work(r)) for r in results]
    work = [(n, w) for n, w in work if w is not None]
    if not work:
        return
    print(f"\n{'vector join / item':<20}" + "".join(f" {n:>12,}" for n, _ in work))
    first = work[0][1]
    for name in ("cells", "probes", "scored", "coarse", "dots"):
        vals = "".join(f" {w[name]:>12,.1f}" for _, w in work)
        grow = f"  x{work[-1][1][name] / first[name]:.2f}" if first[name] and len(work) > 1 else ""
        print(f"{name:<20}{vals}{grow}")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Of repeated dedups of one size, the run of median CPU (the lower middle one of an even
    count), with every run's CPU seconds under ``cpu_runs``; the brute-force baseline, run once
    (the first run), is kept."""
    ranked = sorted(runs, key=lambda r: float(r["dedup_cpu_s"]))
    out = dict(ranked[(len(ranked) - 1) // 2])
    out["cpu_runs"] = [r["dedup_cpu_s"] for r in runs]
    for r in runs:
        if "baseline" in r:
            out.setdefault("baseline", r["baseline"])
    return out


def main(argv: list[str] | None = None) -> None:
    """Build and dedup each size in child processes, then run the photo comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="store-level sizes ('' to skip)")
    ap.add_argument(
        "--photos", type=int, default=1000, help="photo originals for the comparison (0 to skip)"
    )
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument(
        "--keep-corpora",
        action="store_true",
        help="keep each built corpus under --dir and reuse one built before (same size)",
    )
    ap.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the brute-force baseline at the smallest size",
    )
    ap.add_argument(
        "--before",
        type=Path,
        help="another checkout: dedup each size with it too, alternating (same-run baseline)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="dedup each size this many times (alternating with --before) and report the run"
        " of median CPU: the smallest size's CPU, the growth's denominator, varies the most",
    )
    ap.add_argument(
        "--after",
        type=Path,
        help="the checkout to measure (default: the installed library); with --before, "
        "both sides are fixed while the working tree changes",
    )
    ap.add_argument(
        "--side",
        type=int,
        default=SIDE,
        help="every item's width and height (e.g. 32: a corpus of thumbnails, whose items get"
        " the audit's wider embedding candidates)",
    )
    ap.add_argument("--build", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--library", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--dedup", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.library:
        use_library(args.library)
    if args.build:
        home = corpus_home(args.dir, args.build, args.side)
        shutil.rmtree(home, ignore_errors=True)
        built = build(args.build, home, side=args.side)
        (home / "built.json").write_text(json.dumps(built))
        print(json.dumps(built))
        return
    if args.dedup:
        print(
            json.dumps(
                dedup_one(args.dedup, corpus_home(args.dir, args.dedup, args.side), args.baseline),
                default=str,
            )
        )
        return
    results: list[dict[str, Any]] = []
    before: list[dict[str, Any]] = []
    sizes = [int(x) for x in args.sizes.split(",") if x]
    where = ["--dir", str(args.dir), "--side", str(args.side)]
    for n in sizes:
        home = corpus_home(args.dir, n, args.side)
        marker = home / "built.json"
        if args.keep_corpora and marker.exists():
            built = {**json.loads(marker.read_text()), "reused": True}
        else:
            built = _child(["--build", str(n), *where])
        # brute force at the smallest size
        extra = ["--baseline"] if n == min(sizes) and not args.no_baseline else []
        runs: list[dict[str, Any]] = []
        old_runs: list[dict[str, Any]] = []
        for _rep in range(max(1, args.repeat)):
            if args.before:
                old = _child(["--dedup", str(n), *where, "--library", str(args.before)])
                old_runs.append({**built, **old})
                print(json.dumps({"before": old_runs[-1]}, default=str), flush=True)
            after = ["--library", str(args.after)] if args.after else []
            runs.append({**built, **_child(["--dedup", str(n), *where, *extra, *after])})
            extra = []  # brute force once, at the first repetition
            print(json.dumps(runs[-1], default=str), flush=True)
        if old_runs:
            before.append(median_run(old_runs))
        results.append(median_run(runs))
        if not args.keep_corpora:
            shutil.rmtree(home, ignore_errors=True)
    if before:
        print(f"\nbefore ({args.before}):")
        report(before)
        report_phases(before)
        report_join(before)
        print(
            "\nafter / before, CPU s: "
            + ", ".join(
                f"{b['items']:,} {a['dedup_cpu_s'] / b['dedup_cpu_s']:.2f}"
                for a, b in zip(results, before, strict=True)
            )
        )
        print("\nafter:")
    if results:
        report(results)
        report_phases(results)
        report_join(results)
    photos: dict[str, Any] = {}
    if args.photos:
        from bench.dedup_photos import compare

        photos = compare(args.photos, args.dir / "photos")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"store": results, "before": before, "photos": photos}, indent=2, default=str
            )
        )


if __name__ == "__main__":
    main()
