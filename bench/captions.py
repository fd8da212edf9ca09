"""Caption contamination: recall and false positives per family, index and query throughput, memory.

Run: ``.venv/bin/python -m bench.captions [--sizes 100000,1000000] [--per-family 300]
[--queries 25000] [--db-size 100000] [--lsh 128x32x4]``

Data (``bench.caption_corpus``): template captions with boilerplate, planted test captions in
seven families (exact, repunct, reorder, synonym, truncated: should match their source;
boilerplate, unrelated: never should). Each size runs in a child process, so its peak RSS is
its own (it includes the corpus text held in memory to answer verification, ~0.2 KiB/caption).

Per size, in one run:

- *index*: ``CaptionIndexWriter.add`` over the corpus in 50k chunks + commit (the engine; the
  DB read is measured separately below), wall and CPU seconds, captions/s;
- *accuracy*: the planted captions queried at the lowest threshold of the curve; for each
  Jaccard threshold the recall per positive family (the source item found) and, per family,
  how many test captions matched anything else (for ``boilerplate``/``unrelated`` that is a
  false positive; for the others a second corpus caption close to the source);
- *query*: ``--queries`` test captions (2 % planted copies, the rest fresh captions) at the
  default threshold, wall and CPU seconds;
- *baseline* (same run, same 20k captions): ``datasketch`` ``MinHash.bulk`` signatures (the
  well-kept library the issue names) against ours, CPU seconds as a ratio.

``--db-size``: a workspace DB with that many items (bulk-inserted), then ``sync_caption_index``
(DB read + index) against the in-memory writer on the same captions, an incremental sync of 10 %
more rows, and a query through ``open_caption_index`` (verification text from the DB).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.caption_corpus import (
    FAMILIES,
    POSITIVE,
    Planted,
    content_caption,
    corpus_captions,
    plant,
)
from splitaudit.indexer.captions.index import CaptionIndex, CaptionIndexWriter
from splitaudit.indexer.captions.minhash import LshParams, signatures
from splitaudit.indexer.captions.normalize import content_tokens, token_batch, tokens
from splitaudit.indexer.captions.query import (
    DEFAULT_JACCARD,
    CaptionHit,
    CaptionThresholds,
    find_caption_matches,
)

CHUNK = 50_000
CURVE = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def done(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _lsh(spec: str) -> LshParams:
    k, b, r = (int(x) for x in spec.split("x"))
    return LshParams(num_perm=k, bands=b, rows=r)


def build_index(
    folder: Path, corpus: Sequence[str], params: LshParams
) -> tuple[CaptionIndex, dict[str, Any]]:
    """Index ``corpus`` (item id = row + 1) with the writer; timings."""
    clock = _Clock()
    writer = CaptionIndexWriter(folder, "bench", params=params)
    for start in range(0, len(corpus), CHUNK):
        stop = min(len(corpus), start + CHUNK)
        writer.add(np.arange(start + 1, stop + 1, dtype=np.int64), corpus[start:stop])
    writer.commit()
    wall, cpu = clock.done()
    index = CaptionIndex.load(folder, "bench", lambda ids: {i: corpus[i - 1] for i in ids})
    disk = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    return index, {
        "index_wall_s": round(wall, 1),
        "index_cpu_s": round(cpu, 1),
        "captions_per_s": round(len(corpus) / wall),
        "indexed": len(index),
        "disk_mib": round(disk / 2**20, 1),
    }


def accuracy(index: CaptionIndex, planted: Sequence[Planted]) -> dict[str, Any]:
    """Recall and other matches per family at each threshold of ``CURVE``."""
    hits = find_caption_matches(
        index,
        [(i, p.text) for i, p in enumerate(planted)],
        thresholds=CaptionThresholds(jaccard=CURVE[0], max_hits=20),
    )
    by_test: dict[int, list[CaptionHit]] = defaultdict(list)
    for h in hits:
        by_test[h.test_id].append(h)
    curve: dict[str, Any] = {}
    for t in CURVE:
        row: dict[str, Any] = {}
        for family in FAMILIES:
            members = [i for i, p in enumerate(planted) if p.family == family]
            kept = {i: [h for h in by_test[i] if h.jaccard >= t or h.contained] for i in members}
            found = sum(any(h.item_id == planted[i].source + 1 for h in kept[i]) for i in members)
            other = sum(any(h.item_id != planted[i].source + 1 for h in kept[i]) for i in members)
            row[family] = {
                "n": len(members),
                "recall": round(found / len(members), 3),
                "other": other,
            }
        curve[str(t)] = row
    examples = {}
    for family in ("unrelated", "boilerplate", "chance", "synonym"):
        for i, p in enumerate(planted):
            wrong = [
                h
                for h in by_test[i]
                if h.item_id != p.source + 1 and (h.jaccard >= DEFAULT_JACCARD or h.contained)
            ]
            if p.family == family and wrong:
                examples[family] = [p.text, wrong[0].corpus_caption, round(wrong[0].jaccard, 3)]
                break
    kinds = {
        family: sorted(
            {h.kind for i, p in enumerate(planted) if p.family == family for h in by_test[i]}
        )
        for family in POSITIVE
    }
    return {"curve": curve, "other_match_examples": examples, "kinds": kinds}


def boilerplate_stats(corpus: Sequence[str], sample: int = 100_000) -> dict[str, Any]:
    """How much of the corpus is boilerplate: short captions, phrase hits, the most common shingles."""
    rules = CaptionThresholds().rules
    texts = list(corpus[:sample])
    counts: Counter[tuple[str, str]] = Counter()
    short = phrase = 0
    for text in texts:
        words = content_tokens(text)
        short += len(words) < rules.min_tokens
        phrase += len(words) < len(tokens(text))
        counts.update(set(itertools.pairwise(words)))
    common = rules.common_count(len(texts))
    return {
        "captions": len(texts),
        "below_min_tokens": round(short / len(texts), 4),
        "with_boilerplate_phrase": round(phrase / len(texts), 4),
        "common_shingles": sum(1 for c in counts.values() if c >= common),
        "top_shingles": [[" ".join(k), round(c / len(texts), 4)] for k, c in counts.most_common(8)],
    }


def query_throughput(
    index: CaptionIndex, planted: Sequence[Planted], n: int, seed: int = 7
) -> dict[str, Any]:
    """``n`` test captions (2 % planted copies) at the default threshold."""
    rng = random.Random(seed)
    positives = [p for p in planted if p.family in POSITIVE]
    tests = [
        rng.choice(positives).text if rng.random() < 0.02 else content_caption(rng)
        for _ in range(n)
    ]
    clock = _Clock()
    hits = find_caption_matches(index, list(enumerate(tests)))
    wall, cpu = clock.done()
    return {
        "queries": n,
        "query_wall_s": round(wall, 1),
        "query_cpu_s": round(cpu, 1),
        "queries_per_s": round(n / wall),
        "flagged": len({h.test_id for h in hits}),
    }


def datasketch_baseline(
    corpus: Sequence[str], params: LshParams, n: int = 20_000
) -> dict[str, Any]:
    """Signature CPU seconds: datasketch ``MinHash.bulk`` against ours, same captions."""
    sample = list(corpus[:n])
    clock = _Clock()
    batch = token_batch(sample)
    keys, owner = batch.shingles()
    signatures(keys, owner, len(batch), params)
    ours = clock.done()[1]
    try:
        from datasketch import MinHash
    except ImportError:
        return {"datasketch": "not installed"}
    clock = _Clock()
    sets = []
    for text in sample:
        words = content_tokens(text)
        sets.append([f"{a} {b}".encode() for a, b in itertools.pairwise(words)])
    MinHash.bulk(sets, num_perm=params.num_perm)
    theirs = clock.done()[1]
    return {
        "captions": n,
        "ours_cpu_s": round(ours, 2),
        "datasketch_cpu_s": round(theirs, 2),
        "speedup": round(theirs / ours, 1),
    }


def run_size(n: int, per_family: int, queries: int, lsh: str) -> dict[str, Any]:
    """One corpus size, end to end (runs in a child process)."""
    params = _lsh(lsh)
    clock = _Clock()
    corpus = list(corpus_captions(n))
    out: dict[str, Any] = {"size": n, "lsh": lsh, "generate_s": round(clock.done()[0], 1)}
    with tempfile.TemporaryDirectory(prefix="captions-bench-") as tmp:
        index, built = build_index(Path(tmp), corpus, params)
        out |= built
        out["rss_after_index_mib"] = round(peak_rss_mib())
        planted = plant(corpus, per_family)
        out["boilerplate"] = boilerplate_stats(corpus)
        out["accuracy"] = accuracy(index, planted)
        out |= query_throughput(index, planted, queries)
        out["peak_rss_mib"] = round(peak_rss_mib())
    out["baseline"] = datasketch_baseline(corpus, params)
    return out


def run_db(n: int, lsh: str) -> dict[str, Any]:
    """Through the workspace DB: full sync, incremental sync, query with DB text."""
    from splitaudit.indexer.captions.sync import open_caption_index, sync_caption_index
    from splitaudit.indexer.db.engine import transaction
    from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
    from splitaudit.indexer.workspace import Workspace

    params = _lsh(lsh)
    extra = n // 10
    corpus = list(corpus_captions(n + extra))
    out: dict[str, Any] = {"size": n}
    with tempfile.TemporaryDirectory(prefix="captions-db-") as tmp:
        home = Path(tmp)
        ws = Workspace.open(home)
        with transaction(ws.sessions) as s:
            corpus_row = ensure_corpus(s, name="bench", model_id=None, dim=None)
            ids = corpus_row.id, ensure_shard(s, corpus=corpus_row, source="gen", name="all").id
        insert = _inserter(ws, *ids)
        clock = _Clock()
        insert(corpus, 0, n)
        out["db_insert_s"] = round(clock.done()[0], 1)
        # the engine alone on the same captions (baseline for the DB read cost)
        _, mem = build_index(home / "mem", corpus[:n], params)
        out["memory_index_wall_s"] = mem["index_wall_s"]
        clock = _Clock()
        first = sync_caption_index(ws, "bench")
        wall, cpu = clock.done()
        out |= {"sync_wall_s": round(wall, 1), "sync_cpu_s": round(cpu, 1), "sync_read": first.read}
        out["sync_vs_memory"] = round(wall / max(mem["index_wall_s"], 1e-9), 2)
        insert(corpus, n, n + extra)
        clock = _Clock()
        second = sync_caption_index(ws, "bench")
        out |= {"incremental_read": second.read, "incremental_wall_s": round(clock.done()[0], 2)}
        index = open_caption_index(ws, "bench")
        planted = plant(corpus, 100)
        clock = _Clock()
        hits = find_caption_matches(index, [(i, p.text) for i, p in enumerate(planted)])
        out["db_query_wall_s"] = round(clock.done()[0], 2)
        out["db_query_captions"] = len(planted)
        found = {(h.test_id, h.item_id) for h in hits}
        out["db_exact_recall"] = round(
            np.mean(
                [(i, p.source + 1) in found for i, p in enumerate(planted) if p.family == "exact"]
            ),
            3,
        )
        ws.close()
    out["peak_rss_mib"] = round(peak_rss_mib())
    return out


def _inserter(ws: Any, corpus_id: int, shard_id: int) -> Callable[[Sequence[str], int, int], None]:
    from splitaudit.indexer.db.engine import transaction

    sql = (
        "INSERT INTO item (id, corpus_id, shard_id, key, uri, locator, caption, metadata,"
        " has_embedding, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    now = datetime.now(UTC).isoformat(sep=" ")

    def insert(corpus: Sequence[str], start: int, stop: int) -> None:
        for lo in range(start, stop, CHUNK):
            hi = min(stop, lo + CHUNK)
            rows = [
                (
                    i + 1,
                    corpus_id,
                    shard_id,
                    f"{i:09d}",
                    f"gen://{i}",
                    "{}",
                    corpus[i] or None,
                    "{}",
                    0,
                    now,
                )
                for i in range(lo, hi)
            ]
            with transaction(ws.sessions) as s:
                s.connection().exec_driver_sql(sql, rows)

    return insert


def _child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.captions", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"bench.captions {' '.join(args)} failed:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def report(results: list[dict[str, Any]], db: dict[str, Any] | None) -> None:
    """Human-readable summary."""
    for r in results:
        print(f"\n== {r['size']:,} corpus captions (LSH {r['lsh']}), {r['indexed']:,} indexed ==")
        print(
            f"index  {r['index_wall_s']} s wall / {r['index_cpu_s']} s CPU ({r['captions_per_s']:,}/s),"
            f" {r['disk_mib']} MiB on disk"
        )
        print(
            f"query  {r['queries']:,} captions: {r['query_wall_s']} s wall / {r['query_cpu_s']} s CPU,"
            f" {r['flagged']} flagged; peak RSS {r['peak_rss_mib']} MiB"
        )
        b = r["baseline"]
        if "speedup" in b:
            print(
                f"signatures on {b['captions']:,}: ours {b['ours_cpu_s']} s CPU, datasketch"
                f" {b['datasketch_cpu_s']} s CPU ({b['speedup']}x)"
            )
        bp = r["boilerplate"]
        print(
            f"boilerplate in the first {bp['captions']:,}: {bp['below_min_tokens']:.1%} below the"
            f" minimum length, {bp['with_boilerplate_phrase']:.1%} with a boilerplate phrase,"
            f" {bp['common_shingles']} common shingles; top: "
            + ", ".join(f"{t!r} {f:.1%}" for t, f in bp["top_shingles"])
        )
        print("threshold " + " ".join(f"{f[:11]:>11}" for f in FAMILIES))
        for t, row in r["accuracy"]["curve"].items():
            cells = [
                f"{row[f]['recall']:.2f}/{row[f]['other']:>3}"
                if f in POSITIVE
                else f"{row[f]['other']:>3}/{row[f]['n']}"
                for f in FAMILIES
            ]
            print(f"{t:>9} " + " ".join(f"{c:>11}" for c in cells))
        print(
            "(positive families: recall/test captions matching another item; others: false positives/n)"
        )
        for family, ex in r["accuracy"]["other_match_examples"].items():
            print(f"  {family} example: {ex[0]!r} ~ {ex[1]!r} (J={ex[2]})")
    if db:
        print(f"\n== through the DB, {db['size']:,} items ==")
        print(
            f"sync {db['sync_wall_s']} s wall / {db['sync_cpu_s']} s CPU ({db['sync_vs_memory']}x the"
            f" in-memory writer), incremental {db['incremental_read']:,} rows in"
            f" {db['incremental_wall_s']} s, query {db['db_query_captions']} captions in"
            f" {db['db_query_wall_s']} s, exact recall {db['db_exact_recall']}, peak RSS {db['peak_rss_mib']} MiB"
        )


def main(argv: list[str] | None = None) -> None:
    """Parse arguments; run each size in a child; print the report and the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--per-family", type=int, default=300)
    ap.add_argument("--queries", type=int, default=25_000)
    ap.add_argument("--db-size", type=int, default=100_000)
    ap.add_argument("--lsh", default="128x32x4", help="num_perm x bands x rows")
    ap.add_argument("--child", choices=("size", "db"))
    ap.add_argument("--n", type=int, default=0)
    a = ap.parse_args(argv)
    if a.child == "size":
        print(json.dumps(run_size(a.n, a.per_family, a.queries, a.lsh)))
        return
    if a.child == "db":
        print(json.dumps(run_db(a.n, a.lsh)))
        return
    common = ["--per-family", str(a.per_family), "--queries", str(a.queries), "--lsh", a.lsh]
    results = [
        _child(["--child", "size", "--n", size, *common]) for size in a.sizes.split(",") if size
    ]
    db = _child(["--child", "db", "--n", str(a.db_size), "--lsh", a.lsh]) if a.db_size else None
    report(results, db)
    print(json.dumps({"results": results, "db": db}))


if __name__ == "__main__":
    main()
