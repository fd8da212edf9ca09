"""Caption self-join (``dedup --by caption``): wall, CPU, peak RSS and pairs found, by corpus size.

Run: ``.venv/bin/python -m bench.captions_dedup [--sizes 100000,1000000] [--per-family 300]``

Corpus: ``bench.caption_corpus`` template captions (about 12 % boilerplate) with the planted
captions of ``bench.captions`` appended as corpus rows (exact, repunct, reorder, synonym,
truncated copies of a corpus caption; boilerplate-only and unrelated captions). Per size, in a
child process (its peak RSS is its own, and includes the corpus text held for verification):
the index is built with the in-memory writer (``index``, the same-run baseline), then
``caption_self_join`` runs over it (``join``), and the planted copies are checked: a copy is
*found* when it ends in the same cluster as its source (union-find over the pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench.caption_corpus import POSITIVE, corpus_captions, plant
from bench.captions import _Clock, _lsh, build_index, peak_rss_mib
from splitaudit.indexer.captions.self_join import caption_self_join
from splitaudit.indexer.dedup.unionfind import UnionFind


def run_size(n: int, per_family: int, lsh: str) -> dict[str, Any]:
    """One corpus size (runs in a child process)."""
    corpus = list(corpus_captions(n))
    planted = plant(corpus, per_family)
    first_planted = len(corpus)
    corpus += [p.text for p in planted]  # planted row i is item first_planted + i + 1
    out: dict[str, Any] = {"size": len(corpus), "base": n}
    with tempfile.TemporaryDirectory(prefix="captions-dedup-bench-") as tmp:
        index, built = build_index(Path(tmp), corpus, _lsh(lsh))
        out["index_wall_s"], out["index_cpu_s"] = built["index_wall_s"], built["index_cpu_s"]
        rss_before = peak_rss_mib()
        clock = _Clock()
        join = caption_self_join(index)
        wall, cpu = clock.done()
    out |= {
        "join_wall_s": round(wall, 1),
        "join_cpu_s": round(cpu, 1),
        "peak_rss_mib": round(peak_rss_mib()),
        "rss_before_join_mib": round(rss_before),
        **{k: v for k, v in join.stats.items() if k != "captions"},
    }
    uf = UnionFind()
    for p in join.pairs:
        uf.union(p.a, p.b)
    out["clusters"] = len(uf.groups())
    found: Counter[str] = Counter()
    clustered: Counter[str] = Counter()
    for i, p in enumerate(planted):
        item = first_planted + i + 1
        if p.source >= 0 and uf.find(item) == uf.find(p.source + 1):
            found[p.family] += 1
        if uf.find(item) != item:
            clustered[p.family] += 1
    out["recall"] = {f: round(found[f] / per_family, 3) for f in POSITIVE}
    out["negatives_clustered"] = {
        f: clustered[f] for f in sorted({p.family for p in planted} - set(POSITIVE))
    }
    return out


def _child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.captions_dedup", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"bench.captions_dedup {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    """Each size in a child process, then one JSON line per size and a short table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--per-family", type=int, default=300)
    ap.add_argument("--lsh", default="128x32x4")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_size(args.child, args.per_family, args.lsh)))
        return
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        r = _child(["--child", str(n), "--per-family", str(args.per_family), "--lsh", args.lsh])
        results.append(r)
        print(json.dumps(r), flush=True)
    print(
        "\n| captions | index CPU s | join wall s | join CPU s | join/index CPU | peak RSS MiB | pairs (exact/near) | clusters |"
    )
    for r in results:
        print(
            f"| {r['size']:,} | {r['index_cpu_s']} | {r['join_wall_s']} | {r['join_cpu_s']} | "
            f"{r['join_cpu_s'] / max(r['index_cpu_s'], 0.1):.2f} | {r['peak_rss_mib']:,} | "
            f"{r['pairs']:,} ({r['exact_pairs']:,}/{r['near_pairs']:,}) | {r['clusters']:,} |"
        )


if __name__ == "__main__":
    main()
