"""Crash campaign: kill splitaudit at random points, restart it, compare with an uninterrupted run.

    python -m bench.hardening --crash-seconds 600 [--skip-fuzz --skip-load]
    python -m bench.crash_campaign --seconds 600

Scenarios (each trial: a fresh copy of a prepared home, one process killed with SIGKILL or
SIGTERM at a random moment of its measured uninterrupted run time, then the same work run
again to its end):

- ``index``: ``splitaudit index`` of a generated corpus (with a corrupt file) into a new home;
- ``audit-cli``: ``splitaudit audit`` of a split with planted copies against that corpus;
- ``dedup``: ``splitaudit dedup --drop-list`` of the corpus (with planted duplicates);
- ``worker``: a queued (REST-style) audit run by ``splitaudit worker``, restarted until done;
- ``serve``: the same audit run by ``splitaudit serve``'s in-process worker, restarted.

After each trial the outcome is compared with the uninterrupted one: items (keys, SHA-256),
failed items, the FAISS binary store's count, the audit's matches, the drop list; and the
job table: nothing left ``running``/``queued`` (after a worker start fails orphaned local
jobs), no audit's matches doubled. Prints kills per scenario and every mismatch (target 0).
SQLite homes only (PostgreSQL trials would need a database per trial).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPLITAUDIT = str(Path(sys.executable).parent / "splitaudit")
LEASE_S = "2"  # a killed worker's job is claimed again quickly
_LOCK = threading.Lock()


@dataclass
class Tally:
    """Kills and mismatches of one scenario."""

    kills: int = 0
    sigkill: int = 0
    sigterm: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _env(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    env.update(HF_HUB_OFFLINE="1", SPLITAUDIT_TORCH_THREADS="1", PYTHONPATH=str(ROOT))
    if home is not None:
        env["SPLITAUDIT_HOME"] = str(home)
    env.update(extra)
    return env


def _run(
    args: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SPLITAUDIT, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _kill_during(args: list[str], env: dict[str, str], after: float, sig: int) -> int | None:
    """Start ``splitaudit ARGS``, send ``sig`` after ``after`` s; its exit code (None: killed first)."""
    proc = subprocess.Popen(
        [SPLITAUDIT, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        return proc.wait(after)  # finished before the kill
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return None


# ---- data ------------------------------------------------------------------------------


def make_data(base: Path, *, corpus_images: int, split_images: int) -> tuple[Path, Path]:
    """A corpus (photos, 4 planted duplicates, one corrupt file) and a split with planted copies."""
    from splitaudit.indexer.demo import synthetic_photo

    corpus, split = base / "corpus", base / "split"
    for cls in ("a", "b"):
        (corpus / cls).mkdir(parents=True)
    split.mkdir(parents=True)
    for i in range(corpus_images):
        synthetic_photo(i, (200, 150)).save(
            corpus / ("a" if i % 2 else "b") / f"c{i}.jpg", quality=90
        )
    for i in range(4):  # within-corpus duplicates for dedup
        synthetic_photo(i, (200, 150)).resize((160, 120)).save(corpus / "a" / f"dup{i}.png")
    (corpus / "a" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    for i in range(split_images):
        seed = i if i % 3 == 0 else 50_000 + i
        synthetic_photo(seed, (200, 150)).resize((180, 135)).save(split / f"t{i}.jpg", quality=85)
    return corpus, split


# ---- observed state ----------------------------------------------------------------------


def _open(home: Path, url: str | None) -> Any:
    from splitaudit.indexer.workspace import Workspace

    return Workspace.open(home, url)


def index_state(home: Path, url: str | None = None) -> dict[str, Any]:
    """Items, failed items and the binary store's count of corpus ``c``."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import FailedItem, Item
    from splitaudit.indexer.store import binary_index
    from splitaudit.indexer.store.sidecar import Sidecar

    ws = _open(home, url)
    try:
        with ws.sessions() as s:
            items = sorted(s.execute(select(Item.key, Item.sha256)).all())
            failed = sorted(s.scalars(select(FailedItem.key)).all())
        sidecar = ws.corpus_dir("c") / binary_index.SIDECAR_FILE
        count = Sidecar.load(sidecar).count if sidecar.exists() else None
    finally:
        ws.close()
    return {"items": items, "failed": failed, "binary_count": count}


def audit_state(home: Path, url: str | None = None) -> dict[str, Any]:
    """The newest done audit's matches, and the job table's statuses (orphans failed first)."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Audit, Item, Job, Match, SplitItem
    from splitaudit.indexer.jobs.queue import fail_orphaned_local

    ws = _open(home, url)
    try:
        fail_orphaned_local(ws.sessions)  # what a worker starting on this host does
        with ws.sessions() as s:
            done = s.scalars(
                select(Audit.id)
                .join(Job, Job.id == Audit.job_id)
                .where(Job.status == "done")
                .order_by(Audit.id.desc())
            ).first()
            matches = s.execute(
                select(SplitItem.key, Item.key, Match.kind)
                .join(SplitItem, SplitItem.id == Match.split_item_id)
                .outerjoin(Item, Item.id == Match.item_id)
                .where(Match.audit_id == done)
            ).all()
            statuses = sorted(s.scalars(select(Job.status)).all())
    finally:
        ws.close()
    return {"matches": sorted(matches, key=repr), "rows": len(matches), "statuses": statuses}


def _compare(tally: Tally, label: str, got: dict[str, Any], want: dict[str, Any]) -> None:
    for key, value in want.items():
        if got.get(key) != value:
            tally.mismatches.append(
                f"{label}: {key} differs: {str(got.get(key))[:160]} != {str(value)[:160]}"
            )


def _stuck(tally: Tally, label: str, statuses: list[str]) -> None:
    left = [s for s in statuses if s in ("running", "queued")]
    if left:
        tally.mismatches.append(f"{label}: jobs left {left}")


# ---- scenarios ---------------------------------------------------------------------------


@dataclass
class Bench:
    """Prepared data, homes and baselines shared by the scenarios."""

    tmp: Path
    corpus: Path
    split: Path
    indexed: Path  # a home with corpus c indexed (hash only)
    rng: random.Random = field(default_factory=lambda: random.Random(25))
    n: int = 0

    def fresh(self, template: Path | None) -> Path:
        with _LOCK:
            self.n += 1
            home = self.tmp / f"trial{self.n}"
        if template is not None:
            shutil.copytree(template, home)
        return home

    def signal(self, tally: Tally) -> int:
        sig = self.rng.choice((signal.SIGKILL, signal.SIGTERM))
        if sig == signal.SIGKILL:
            tally.sigkill += 1
        else:
            tally.sigterm += 1
        tally.kills += 1
        return sig


def _timed(fn: Callable[[], subprocess.CompletedProcess[str]]) -> float:
    started = time.perf_counter()
    done = fn()
    if done.returncode not in (0, 1):
        raise RuntimeError(f"baseline failed ({done.returncode}): {done.stderr[-800:]}")
    return time.perf_counter() - started


def index_trials(b: Bench, tally: Tally, deadline: float) -> None:
    args = ["index", str(b.corpus), "--corpus", "c", "--no-embed", "--quiet"]
    base_home = b.fresh(None)
    took = _timed(lambda: _run([*args, "--home", str(base_home)], _env()))
    want = index_state(base_home)
    while time.monotonic() < deadline:
        home = b.fresh(None)
        sig = b.signal(tally)
        _kill_during([*args, "--home", str(home)], _env(), b.rng.uniform(0.05, 1.0) * took, sig)
        again = _run([*args, "--home", str(home)], _env())
        if again.returncode != 0:
            tally.mismatches.append(f"index rerun exit {again.returncode}: {again.stderr[-300:]}")
            continue
        _compare(tally, f"index #{b.n}", index_state(home), want)
        shutil.rmtree(home, ignore_errors=True)


def audit_cli_trials(b: Bench, tally: Tally, deadline: float) -> None:
    def args(home: Path) -> list[str]:
        return ["audit", str(b.split), "--corpus", "c", "--home", str(home), "--quiet",
                "--max-unreadable", "5"]  # fmt: skip

    base_home = b.fresh(b.indexed)
    took = _timed(lambda: _run(args(base_home), _env()))
    want = audit_state(base_home)
    while time.monotonic() < deadline:
        home = b.fresh(b.indexed)
        sig = b.signal(tally)
        _kill_during(args(home), _env(), b.rng.uniform(0.05, 1.0) * took, sig)
        again = _run(args(home), _env())
        if again.returncode not in (0, 1):
            tally.mismatches.append(f"audit rerun exit {again.returncode}: {again.stderr[-300:]}")
            continue
        got = audit_state(home)
        _compare(
            tally, f"audit-cli #{b.n}", got, {"matches": want["matches"], "rows": want["rows"]}
        )
        _stuck(tally, f"audit-cli #{b.n}", got["statuses"])
        shutil.rmtree(home, ignore_errors=True)


def dedup_trials(b: Bench, tally: Tally, deadline: float) -> None:
    def args(home: Path) -> list[str]:
        return ["dedup", "--corpus", "c", "--home", str(home), "--quiet",
                "--drop-list", str(home / "drop.txt")]  # fmt: skip

    base_home = b.fresh(b.indexed)
    took = _timed(lambda: _run(args(base_home), _env()))
    want = (base_home / "drop.txt").read_text()
    while time.monotonic() < deadline:
        home = b.fresh(b.indexed)
        sig = b.signal(tally)
        _kill_during(args(home), _env(), b.rng.uniform(0.05, 1.0) * took, sig)
        again = _run(args(home), _env())
        got = (home / "drop.txt").read_text() if (home / "drop.txt").exists() else None
        if again.returncode != 0 or got != want:
            tally.mismatches.append(
                f"dedup #{b.n}: exit {again.returncode}, drop list equal: {got == want}"
            )
        shutil.rmtree(home, ignore_errors=True)


def _queue_audit(home: Path, split: Path, url: str | None) -> int:
    from splitaudit.indexer.audit.service import submit_audit

    ws = _open(home, url)
    try:
        return submit_audit(ws, split_uri=str(split), name="s", corpora=["c"], local=False)
    finally:
        ws.close()


def _job_done(home: Path, url: str | None) -> bool:
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Job

    ws = _open(home, url)
    try:
        with ws.sessions() as s:
            return set(s.scalars(select(Job.status)).all()) <= {"done", "failed"}
    finally:
        ws.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _service_args(kind: str) -> list[str]:
    if kind == "worker":
        return ["worker", "--poll", "0.1"]
    return ["serve", "--port", str(_free_port())]


def service_trials(b: Bench, tally: Tally, deadline: float, kind: str) -> None:
    """A queued audit run by ``splitaudit worker`` / ``serve``, killed and restarted until done."""
    env_extra = {"SPLITAUDIT_JOB_LEASE_S": LEASE_S}

    def prepared() -> tuple[Path, dict[str, str]]:
        home = b.fresh(b.indexed)
        env = _env(home, **env_extra)
        _queue_audit(home, b.split, None)
        return home, env

    def finish(home: Path, env: dict[str, str]) -> float:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [SPLITAUDIT, *_service_args(kind), "--home", str(home)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            limit = time.monotonic() + 180
            while not _job_done(home, None) and time.monotonic() < limit:
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(60)
        return time.perf_counter() - started

    base_home, env = prepared()
    took = finish(base_home, env)
    want = audit_state(base_home)
    while time.monotonic() < deadline:
        home, env = prepared()
        sig = b.signal(tally)
        _kill_during(
            [*_service_args(kind), "--home", str(home)], env, b.rng.uniform(0.1, 1.0) * took, sig
        )
        finish(home, env)
        got = audit_state(home)
        label = f"{kind} #{b.n}"
        _compare(tally, label, got, {"matches": want["matches"], "rows": want["rows"]})
        _stuck(tally, label, got["statuses"])
        shutil.rmtree(home, ignore_errors=True)


# ---- driver ------------------------------------------------------------------------------


def campaign(
    tmp: Path,
    seconds: float,
    *,
    corpus_images: int = 60,
    split_images: int = 18,
    parallel: bool = False,
) -> dict[str, Tally]:
    """Share ``seconds`` among the scenarios; print and return each one's tally."""
    corpus, split = make_data(tmp / "data", corpus_images=corpus_images, split_images=split_images)
    indexed = tmp / "indexed"
    made = _run(
        ["index", str(corpus), "--corpus", "c", "--no-embed", "--quiet", "--home", str(indexed)],
        _env(),
    )
    if made.returncode != 0:
        raise RuntimeError(made.stderr[-800:])
    b = Bench(tmp=tmp, corpus=corpus, split=split, indexed=indexed)
    scenarios: list[tuple[str, Callable[[Bench, Tally, float], None]]] = [
        ("index", index_trials),
        ("audit-cli", audit_cli_trials),
        ("dedup", dedup_trials),
        ("worker", lambda b, t, d: service_trials(b, t, d, "worker")),
        ("serve", lambda b, t, d: service_trials(b, t, d, "serve")),
    ]
    tallies: dict[str, Tally] = {}
    # Sequential: each scenario gets its share; parallel: every scenario runs the whole time.
    share = seconds if parallel else seconds / len(scenarios)

    def one(name: str, run: Callable[[Bench, Tally, float], None]) -> None:
        tally = Tally()
        started = time.monotonic()
        run(b, tally, started + share)
        tally.seconds = time.monotonic() - started
        tallies[name] = tally
        print(
            f"crash {name:9s}: {tally.kills:3d} kills (SIGKILL {tally.sigkill}, SIGTERM "
            f"{tally.sigterm}) in {tally.seconds:.0f}s, mismatches {len(tally.mismatches)}",
            flush=True,
        )
        for line in tally.mismatches[:10]:
            print(f"  - {line}")

    if parallel:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(scenarios)) as pool:
            for done in [pool.submit(one, name, run) for name, run in scenarios]:
                done.result()
    else:
        for name, run in scenarios:
            one(name, run)
    total = sum(t.kills for t in tallies.values())
    bad = sum(len(t.mismatches) for t in tallies.values())
    print(f"crash total    : {total} kills, {bad} mismatches (target 0)")
    return tallies


def main() -> None:
    """Run the crash campaign on its own."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=600.0, help="budget for all scenarios")
    parser.add_argument("--corpus-images", type=int, default=60)
    parser.add_argument("--split-images", type=int, default=18)
    parser.add_argument("--json", type=Path, help="write the tallies as JSON")
    parser.add_argument(
        "--parallel", action="store_true", help="run the scenarios at once (a machine with cores)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="splitaudit-crash-") as tmp:
        tallies = campaign(
            Path(tmp),
            args.seconds,
            corpus_images=args.corpus_images,
            split_images=args.split_images,
        )
    if args.json:
        args.json.write_text(
            json.dumps({k: vars(v) for k, v in tallies.items()}, indent=2), encoding="utf-8"
        )


if __name__ == "__main__":
    main()
