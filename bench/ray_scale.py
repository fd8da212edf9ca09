"""Ray against the local executor: dedup and an audit of a synthetic corpus, same results, wall / CPU.

Run: ``.venv/bin/python -m bench.ray_scale [--items 100000] [--queries 10000] [--workers 2]``

The corpus is ``bench.dedup``'s store-level one (DB rows bulk-inserted, vector batch files,
planted clusters, no pixels: pairs are decided by digests, pHash radius and cosine). In one
process, same run:

* **dedup**: ``run_dedup`` with the local executor, then on a local Ray instance of
  ``--workers`` CPUs (one actor per CPU); the edges (pair, kind, Hamming, cosine, verifier
  score, bit for bit), clusters and summary are compared;
* **audit**: ``--queries`` synthetic test rows (a fifth of them edited copies of corpus items:
  a few pHash bits flipped, the embedding at cosine ~0.96, some byte-exact) matched against
  the corpus by ``match_corpus`` here and by ``match_corpus_on_ray`` (the corpus's vector
  index cut into one shard per actor); the classified pairs are compared (row, item, kind,
  Hamming, cosine, verifier score), and the shards' layout, the bytes of the index each actor
  maps and its resident memory at the end are reported.

Wall is the run itself (the Ray instance is started before it and timed apart); CPU is this
process's plus, for Ray, every process it started: the raylet, GCS and idle workers read from
/proc before and after (Linux only), the actors as they report their own when closed.
Ratios are against the local executor in the same run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.dedup import DEFAULT_DIR as DEDUP_DIR
from bench.dedup import build, peak_rss_mb, unit

DEFAULT_DIR = DEDUP_DIR.parent / "ray_scale"
COPY_SHARE = 0.2  # of the audit's queries: edited copies of corpus items
EXACT_SHARE = 0.2  # of those copies: byte-exact (same SHA-256)


def descendants_cpu_s(exclude: frozenset[int] = frozenset()) -> float:
    """CPU seconds (user + system, with their reaped children) of every process below this one
    but ``exclude``."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick
    me, total = os.getpid(), 0.0
    for pid in parent:
        up = parent.get(pid)
        while up is not None and up not in (0, 1, me):
            up = parent.get(up)
        if up == me and pid not in exclude:
            total += times[pid]
    return total


class ActorCpu(logging.Handler):
    """Collects the CPU seconds the Ray actors report when they close (``log_actor_cpu``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds = 0.0
        self.pids: set[int] = set()
        self.memory: dict[str, Any] = {}  # the last sharded audit's actors: bytes mapped, RSS
        self.dedup_memory: dict[str, Any] = {}  # the last dedup's join shards and actors

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        found = re.search(r"actors used ([0-9.]+) CPU-s \(pids ([0-9,]*)\)", message)
        if found:
            self.seconds += float(found.group(1))
            self.pids.update(int(p) for p in found.group(2).split(",") if p)
        hashes = re.search(r"hash index \((\d+) hashes\) in (\d+) shards", message)
        if hashes:
            self.memory = {"hash_shards": int(hashes.group(2))}
        shards = re.search(
            r"float index \((.*)\) in (\d+) shards; bytes mapped per actor: (.*)", message
        )
        if shards:
            self.memory |= {
                "vector_index": shards.group(1),
                "shards": int(shards.group(2)),
                "mapped_mib_per_actor": [
                    round(int(b) / 2**20, 1) for b in shards.group(3).split(",") if b
                ],
            }
        joined = re.search(
            r"dedup vector join shards mapped (.*) bytes; actors resident after the joins: (.*) MiB",
            message,
        )
        if joined:
            self.dedup_memory = {
                "join_mapped_mib_per_shard": [
                    round(int(b) / 2**20, 1) for b in joined.group(1).split(",") if b
                ],
                "rss_mib_per_actor_after_joins": [int(m) for m in joined.group(2).split(",") if m],
            }
        rss = re.search(r"resident memory at the end: (.*) MiB", message)
        if rss:
            self.memory["rss_mib_per_actor"] = [int(m) for m in rss.group(1).split(",") if m]


ACTORS = ActorCpu()


def _clock() -> tuple[float, float, float]:
    # an actor's process may outlive its run for a moment: counted once, by its own report
    others = descendants_cpu_s(frozenset(ACTORS.pids))
    return time.perf_counter(), time.process_time(), others + ACTORS.seconds


def _since(start: tuple[float, float, float]) -> dict[str, float]:
    """Wall and CPU seconds since ``start``: this process, the live processes below it, and
    the actors (whose processes are gone by now: they report their own CPU when closed)."""
    wall, cpu, others = _clock()
    return {
        "wall_s": round(wall - start[0], 2),
        "cpu_s": round(cpu - start[1] + others - start[2], 2),
    }


def _edges(ws: Any, run_id: int) -> set[tuple[Any, ...]]:
    from sqlalchemy import select

    from splitaudit.indexer.db.models import DedupEdge

    with ws.sessions() as s:
        return {
            (e.a_id, e.b_id, e.kind, e.hamming, e.cosine, e.verify)
            for e in s.scalars(select(DedupEdge).where(DedupEdge.run_id == run_id))
        }


def _clusters(ws: Any, run_id: int) -> set[frozenset[int]]:
    from sqlalchemy import select

    from splitaudit.indexer.db.models import DedupMember

    groups: dict[tuple[bool, int], set[int]] = {}
    with ws.sessions() as s:
        for c, sem, i in s.execute(
            select(DedupMember.cluster, DedupMember.semantic, DedupMember.item_id).where(
                DedupMember.run_id == run_id
            )
        ):
            groups.setdefault((bool(sem), int(c)), set()).add(int(i))
    return {frozenset(g) for g in groups.values()}


class DedupPhases(logging.Handler):
    """The CPU by phase each dedup run logs (the driver's phases: ``dedup.phase_clock``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.last: dict[str, Any] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "dedup %d: CPU by phase %s" and isinstance(record.args, tuple):
            self.last = dict(record.args[1])


def dedup_both(ws: Any, workers: int, unsharded: bool = False) -> dict[str, Any]:
    """Dedup here, then on Ray; figures and whether the results are the same. ``unsharded``:
    also on Ray with the self-joins on the driver (the design before the joins were sharded:
    the actors only verify), between the two."""
    from unittest import mock

    from splitaudit.indexer.dedup import ray_run
    from splitaudit.indexer.dedup.self_joins import LocalSelfJoins
    from splitaudit.indexer.dedup.service import create_dedup, run_dedup
    from splitaudit.indexer.pipeline.ray_match import Executor

    class _DriverJoins(LocalSelfJoins):
        mapped: tuple[int, ...] = ()  # nothing mapped by the actors for the joins

    phases = DedupPhases()
    logging.getLogger("splitaudit.indexer.dedup.service").addHandler(phases)
    logging.getLogger("splitaudit.indexer.dedup.service").setLevel(logging.INFO)
    out: dict[str, Any] = {}
    runs: dict[str, int] = {}
    plan = [("local", Executor(), False), ("ray", Executor("ray", workers=workers), False)]
    if unsharded:
        plan.insert(1, ("ray_unsharded", Executor("ray", workers=workers), True))
    for name, executor, on_driver in plan:
        runs[name] = create_dedup(ws, corpus="syn")
        start = _clock()
        with mock.patch.object(
            ray_run,
            "ShardedSelfJoins",
            (lambda *_a: _DriverJoins()) if on_driver else ray_run.ShardedSelfJoins,
        ):
            summary = run_dedup(ws, runs[name], executor=executor)
        out[name] = {**_since(start), "clusters": summary["clusters"]}
        out[name]["driver_cpu_by_phase"] = {k: v["cpu_s"] for k, v in phases.last.items()}
        print(f"dedup {name}: {out[name]}", flush=True)
    if unsharded:
        out["unsharded_identical_edges"] = _edges(ws, runs["ray_unsharded"]) == _edges(
            ws, runs["local"]
        )
    local_edges, ray_edges = _edges(ws, runs["local"]), _edges(ws, runs["ray"])
    out["edges"] = len(local_edges)
    out["identical_edges"] = local_edges == ray_edges
    out["identical_clusters"] = _clusters(ws, runs["local"]) == _clusters(ws, runs["ray"])
    out["edges_only_local"] = len(local_edges - ray_edges)
    out["edges_only_ray"] = len(ray_edges - local_edges)
    out["actors"] = ACTORS.dedup_memory
    return out


def synthetic_split(ws: Any, queries: int, seed: int = 7) -> tuple[Any, npt.NDArray[np.float32]]:
    """Test rows at the store level: edited copies of random corpus items, the rest random."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Item
    from splitaudit.indexer.dedup.pairs import MIRROR_MASK, vector_batches
    from splitaudit.indexer.match.split_state import SplitState
    from splitaudit.indexer.store.binary_index import signed_to_unsigned
    from splitaudit.indexer.store.calibrate import iter_chunks

    rng = np.random.default_rng(seed)
    with ws.sessions() as s:
        refs = vector_batches(s, 1)
        rows = s.execute(select(Item.id, Item.sha256, Item.phash).order_by(Item.id)).all()
    ids_l, vec_l = zip(*iter_chunks(ws.corpus_dir("syn"), refs), strict=True)
    corpus_ids, corpus_vecs = np.concatenate(ids_l), np.concatenate(vec_l)
    position = {int(i): n for n, i in enumerate(corpus_ids.tolist())}
    dim = corpus_vecs.shape[1]
    vectors = unit(rng.standard_normal((queries, dim), dtype=np.float32))
    hashes = signed_to_unsigned(rng.integers(-(2**63), 2**63 - 1, queries, dtype=np.int64))
    shas = [rng.bytes(32).hex() for _ in range(queries)]
    copies = int(COPY_SHARE * queries)
    for r, pick in enumerate(rng.choice(len(rows), copies, replace=False).tolist()):
        item_id, sha, phash = rows[pick]
        base = corpus_vecs[position[int(item_id)]]
        noise = rng.standard_normal(dim).astype(np.float32) / np.sqrt(dim)
        vectors[r] = unit((base + 0.3 * noise)[None])[0]
        h = int(signed_to_unsigned([int(phash)])[0])
        for bit in rng.choice(64, int(rng.integers(0, 7)), replace=False).tolist():
            h ^= 1 << bit
        hashes[r] = np.uint64(h)
        if rng.random() < EXACT_SHARE:
            shas[r] = str(sha)
    state = SplitState(
        ids=np.arange(1, queries + 1, dtype=np.int64),
        keys=[f"q{r:07d}" for r in range(queries)],
        labels=[None] * queries,
        sha256=shas,
        pixel=[None] * queries,
        stream=[None] * queries,
        phash=hashes,
        phash_mirror=hashes ^ MIRROR_MASK,
        min_side=np.full(queries, 256, np.int32),
        thumbs=np.zeros((queries, 32, 32), np.uint8),
    )
    return state, vectors


def _pairs(pairs: list[Any]) -> set[tuple[Any, ...]]:
    return {(p.row, p.item_id, p.kind, p.hamming, p.cosine, p.verify) for p in pairs}


def audit_both(
    ws: Any, queries: int, workers: int, hash_shard_min: int | None = None
) -> dict[str, Any]:
    """An audit's matching here, then on Ray; figures and whether the pairs are the same."""
    from splitaudit.indexer.match.engine import match_corpus
    from splitaudit.indexer.match.thresholds import thresholds_for_model
    from splitaudit.indexer.match.verify_store import open_verify_store
    from splitaudit.indexer.pipeline.index import open_corpus_index
    from splitaudit.indexer.pipeline.ray_match import match_corpus_on_ray

    state, vectors = synthetic_split(ws, queries)
    th = thresholds_for_model("synthetic-64")
    index = open_corpus_index(ws, "syn")
    out: dict[str, Any] = {"queries": queries, "vector_index": index.info().get("vector_index")}
    start = _clock()
    with open_verify_store(ws.home) as store, ws.sessions() as s:
        local = match_corpus(
            s,
            corpus_id=1,
            index=index,
            state=state,
            vectors=vectors,
            thresholds=th,
            store=store,
        ).pairs
    out["local"] = {**_since(start), "pairs": len(local)}
    print(f"audit local: {out['local']}", flush=True)
    start = _clock()
    remote = match_corpus_on_ray(
        ws,
        corpus="syn",
        corpus_id=1,
        index=index,
        state=state,
        vectors=vectors,
        thresholds=th,
        workers=workers,
        **({} if hash_shard_min is None else {"hash_shard_min": hash_shard_min}),
    )
    out["ray"] = {**_since(start), "pairs": len(remote), **ACTORS.memory}
    print(f"audit ray: {out['ray']}", flush=True)
    a, b = _pairs(local), _pairs(remote)
    out["identical_pairs"] = a == b
    out["pairs_only_local"], out["pairs_only_ray"] = len(a - b), len(b - a)
    planted = {r for r, *_ in a}
    out["copies_found"] = round(
        len(planted & set(range(int(COPY_SHARE * queries)))) / max(1, int(COPY_SHARE * queries)), 4
    )
    return out


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the corpus, run both comparisons, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument(
        "--workers", type=int, default=2, help="CPUs (actors) of the local Ray instance"
    )
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--only", choices=["dedup", "audit"], help="run one of the two comparisons")
    ap.add_argument(
        "--unsharded",
        action="store_true",
        help="dedup: also run on Ray with the self-joins on the driver (the unsharded design)",
    )
    ap.add_argument(
        "--hash-shard-min",
        type=int,
        help="shard a hash index with tables from this many hashes (default: the product's)",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a throwaway local instance
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from splitaudit.indexer.pipeline.index import open_corpus_index
    from splitaudit.indexer.workspace import Workspace

    for name in ("splitaudit.indexer.pipeline.ray_match", "splitaudit.indexer.dedup.ray_run"):
        logging.getLogger(name).addHandler(ACTORS)
        logging.getLogger(name).setLevel(logging.INFO)
    home = args.dir / f"n{args.items}"
    result: dict[str, Any] = {"items": args.items, "workers": args.workers}
    if not home.exists():
        result["build"] = build(args.items, home)
    ws = Workspace.open(home, migrate=False)
    t = time.perf_counter()
    open_corpus_index(ws, "syn")  # built (and saved) before either executor is timed
    result["index_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    result["ray_start_s"] = round(time.perf_counter() - t, 1)
    try:
        if args.only != "audit":
            result["dedup"] = dedup_both(ws, args.workers, args.unsharded)
        if args.only != "dedup":
            result["audit"] = audit_both(ws, args.queries, args.workers, args.hash_shard_min)
    finally:
        ray.shutdown()
        ws.close()
    result["peak_rss_mb"] = round(peak_rss_mb())
    for part in ("dedup", "audit"):
        if part not in result:
            continue
        r = result[part]
        r["ray_vs_local_wall"] = round(r["ray"]["wall_s"] / max(r["local"]["wall_s"], 1e-9), 2)
        r["ray_vs_local_cpu"] = round(r["ray"]["cpu_s"] / max(r["local"]["cpu_s"], 1e-9), 2)
        if "ray_unsharded" in r:
            for unit_ in ("wall_s", "cpu_s"):
                r[f"unsharded_vs_local_{unit_[:-2]}"] = round(
                    r["ray_unsharded"][unit_] / max(r["local"][unit_], 1e-9), 2
                )
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
