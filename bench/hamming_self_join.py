"""Micro-bench of ``MultiIndexHash.self_join`` on ``bench.dedup``'s hashes: CPU and wall per
size, for radius 8 (the near tier's ``phash_hamming``) plain and mirrored, optionally against
another checkout (same run, alternating) and against FAISS brute-force range search.

    nice -n 5 .venv/bin/python -m bench.hamming_self_join --sizes 100000,1000000 \
        --before /tmp/h1-before --brute 100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

RADIUS = 8


def bench_hashes(n: int, seed: int = 0) -> npt.NDArray[np.uint64]:
    """``bench.dedup.build``'s hashes (uniform, 5% planted copies: exact or 0-6 bits flipped)
    without the database."""
    from bench.dedup import CHUNK, EXACT_SHARE, plan

    cluster, member = plan(n, seed)
    k = int(cluster.max()) + 1
    rng = np.random.default_rng((seed, 1))
    rng.standard_normal((k, 64), dtype=np.float32)  # the bench's base vectors (same stream)
    base_hash = rng.integers(-(2**63), 2**63 - 1, k, dtype=np.int64)
    out = np.empty(n, np.int64)
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        crng = np.random.default_rng((seed, 2, start))
        crng.standard_normal((m, 64), dtype=np.float32)
        hashes = crng.integers(-(2**63), 2**63 - 1, m, dtype=np.int64)
        for r in np.flatnonzero(cluster[start : start + m] >= 0).tolist():
            c, mem = int(cluster[start + r]), int(member[start + r])
            if mem == 0 or crng.random() < EXACT_SHARE:
                hashes[r] = base_hash[c]
                continue
            h = int(base_hash[c]) & (2**64 - 1)
            for bit in crng.choice(64, int(crng.integers(0, 7)), replace=False).tolist():
                h ^= 1 << bit
            hashes[r] = np.int64(h - 2**64 if h >= 2**63 else h)
        out[start : start + m] = hashes
    return out.view(np.uint64)


def measure(n: int, repeat: int) -> dict[str, Any]:
    """Build + self-join (plain and mirrored) at size ``n`` with the imported library."""
    from splitaudit.indexer.dedup.pairs import MIRROR_MASK
    from splitaudit.indexer.store.hamming_mih import MultiIndexHash

    codes = bench_hashes(n)
    c0, w0 = time.process_time(), time.perf_counter()
    mih = MultiIndexHash(codes, np.arange(1, n + 1, dtype=np.int64))
    out: dict[str, Any] = {"n": n, "build_cpu": time.process_time() - c0}
    out["build_wall"] = time.perf_counter() - w0
    for name, m in (("plain", 0), ("mirror", int(MIRROR_MASK))):
        best: tuple[float, float] | None = None
        for _ in range(repeat):
            c0, w0 = time.process_time(), time.perf_counter()
            a, b, d = mih.self_join(RADIUS, m)
            t = (time.process_time() - c0, time.perf_counter() - w0)
            best = t if best is None or t[0] < best[0] else best
        assert best is not None
        out[f"{name}_cpu"], out[f"{name}_wall"] = best
        out[f"{name}_pairs"] = len(a)
        key = np.sort((a.astype(np.int64) * n + b) * 16 + d)
        out[f"{name}_digest"] = int(np.bitwise_xor.reduce(key * 2654435761 % (2**61 - 1)))
    return out


def brute(n: int) -> dict[str, Any]:
    """The plain self-join's pairs by FAISS ``IndexBinaryFlat.range_search`` (at ``n`` <= ~100k)."""
    import faiss

    from splitaudit.indexer.store.hamming_mih import MultiIndexHash

    codes = bench_hashes(n)
    data = codes.astype(">u8").view(np.uint8).reshape(n, 8)
    index = faiss.IndexBinaryFlat(64)
    index.add(data)
    c0, w0 = time.process_time(), time.perf_counter()
    lims, dist, found = index.range_search(data, RADIUS + 1)  # strict: < radius + 1
    out: dict[str, Any] = {"brute_cpu": time.process_time() - c0}
    out["brute_wall"] = time.perf_counter() - w0
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(lims.astype(np.int64)))
    keep = rows <= found
    want = set(zip(rows[keep].tolist(), found[keep].tolist(), dist[keep].tolist(), strict=True))
    a, b, d = MultiIndexHash(codes, np.arange(n, dtype=np.int64)).self_join(RADIUS)
    got = list(zip(a.tolist(), b.tolist(), d.tolist(), strict=True))
    out["brute_pairs"], out["same_pairs"] = (
        len(want),
        len(got) == len(set(got)) and set(got) == want,
    )
    return out


def use_checkout(checkout: Path) -> None:
    """Import ``splitaudit`` from another checkout."""
    from bench.library import use_library

    use_library(checkout)


def _child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.hamming_self_join", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"bench.hamming_self_join {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--before", type=Path, help="another checkout, measured alternately")
    p.add_argument("--brute", type=int, default=0, help="check against FAISS at this size")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    p.add_argument("--lib", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.lib:
        use_checkout(args.lib)
    if args.one is not None:
        print(json.dumps(brute(args.one) if args.brute else measure(args.one, args.repeat)))
        return
    rows = []
    for n in [int(s) for s in args.sizes.split(",") if s]:
        for label, lib in (("before", args.before), ("after", None)):
            if label == "before" and lib is None:
                continue
            extra = ["--lib", str(lib)] if lib else []
            r = _child(["--one", str(n), "--repeat", str(args.repeat), *extra])
            r["label"] = label
            rows.append(r)
            print(
                f"{label:6} n={n:>8}: build {r['build_cpu']:.2f} CPU-s; self_join r={RADIUS} "
                f"plain {r['plain_cpu']:.2f} CPU-s ({r['plain_wall']:.2f} wall, "
                f"{r['plain_pairs']} pairs), mirror {r['mirror_cpu']:.2f} CPU-s "
                f"({r['mirror_wall']:.2f} wall, {r['mirror_pairs']} pairs)",
                flush=True,
            )
    sizes = sorted({r["n"] for r in rows})
    for label in ("before", "after"):
        mine = {r["n"]: r for r in rows if r["label"] == label}
        if len(mine) > 1:
            lo, hi = mine[sizes[0]], mine[sizes[-1]]
            cpu = (
                (hi["plain_cpu"] + hi["mirror_cpu"]) / (lo["plain_cpu"] + lo["mirror_cpu"])
                if lo["plain_cpu"] + lo["mirror_cpu"]
                else float("nan")
            )
            print(f"{label}: growth {sizes[0]} -> {sizes[-1]} (plain + mirror CPU) x{cpu:.1f}")
    if args.before:
        for n in sizes:
            b = next(r for r in rows if r["n"] == n and r["label"] == "before")
            a = next(r for r in rows if r["n"] == n and r["label"] == "after")
            same = all(a[f"{k}_digest"] == b[f"{k}_digest"] for k in ("plain", "mirror"))
            print(
                f"n={n}: after/before CPU plain {a['plain_cpu'] / b['plain_cpu']:.2f}, "
                f"mirror {a['mirror_cpu'] / b['mirror_cpu']:.2f}; same pairs: {same}"
            )
    if args.brute:
        r = _child(["--one", str(args.brute), "--brute", str(args.brute)])
        print(
            f"FAISS IndexBinaryFlat range search n={args.brute}: {r['brute_cpu']:.2f} CPU-s "
            f"({r['brute_wall']:.2f} wall), {r['brute_pairs']} pairs; self_join identical: "
            f"{r['same_pairs']}"
        )


if __name__ == "__main__":
    main()
