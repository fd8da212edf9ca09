"""Hardening bench: a long schemathesis campaign, 20 concurrent clients on the read endpoints,
and a crash campaign.

    python -m bench.hardening [--requests 20000] [--clients 20] [--seconds 30] [--skip-fuzz]
                              [--skip-load] [--crash-seconds 600] [--crash-parallel]

Crash: ``bench.crash_campaign`` kills index, audit (CLI), dedup, worker and serve runs with
SIGKILL / SIGTERM at random moments, restarts them and compares every outcome with an
uninterrupted run (items, failed items, FAISS count, matches, drop list, no job stuck or
doubled); prints kills and mismatches (target 0).

Campaign: every operation of the live OpenAPI spec, valid and invalid input, once with no
auth configured and once with API tokens (the token sent); prints requests sent, 5xx count
(target 0) and distinct failures (status / content-type / schema conformance).

Load: a real small audit (hash-only corpus of generated photos, a split with planted
copies) served by uvicorn in its own process; ``--clients`` threads loop over the report,
a matches page and thumbnails for ``--seconds``; prints requests/s, p50/p99 and errors,
with ``GET /api/v1/health`` under the same load measured first as the baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests

from bench.fuzz_api import FuzzResult, free_port, fuzz, live_server

ROOT = Path(__file__).resolve().parent.parent
BENCH_TOKEN = "tok-bench-0123456789"  # tokens have at least 16 characters
OPERATION_MODES = (
    34  # ~17 operations x (positive, negative): examples per mode from the request target
)


def _fuzz_home(tmp: Path) -> Path:
    """A home with one finished audit (real rows, so ids and thumbnails exist)."""
    return _audited_home(tmp / "fuzz", corpus_images=6, split_images=4)


def campaign(tmp: Path, total_requests: int) -> None:
    """Fuzz with and without tokens until about ``total_requests`` were sent."""
    from splitaudit.app.main import create_app
    from splitaudit.app.settings import ApiSettings

    combined = FuzzResult()
    for label, tokens in (("no auth", {}), ("auth", {"bench": BENCH_TOKEN})):
        home = _fuzz_home(tmp / label.replace(" ", "-"))
        roots = tmp / "roots"
        roots.mkdir(exist_ok=True)
        settings = ApiSettings(home=home, run_worker=False, source_roots=[roots], api_tokens=tokens)
        started = time.perf_counter()
        result = FuzzResult()
        with live_server(create_app(settings)) as url:
            headers = {"Authorization": f"Bearer {BENCH_TOKEN}"} if tokens else None
            seed = 1
            # Hypothesis stops early on small input spaces: new seeds until the share is sent.
            while (remaining := total_requests // 2 - result.requests) > 0:
                examples = max(10, remaining // OPERATION_MODES)
                result.merge(fuzz(url, max_examples=examples, headers=headers, seed=seed))
                seed += 1
        took = time.perf_counter() - started
        print(
            f"campaign {label:8s}: {result.requests} requests in {took:.0f}s, "
            f"5xx {result.server_errors}, distinct failures {len(result.failures)}, "
            f"statuses {dict(sorted(result.statuses.items()))}"
        )
        combined.merge(result)
    print(
        f"campaign total   : {combined.requests} requests, 5xx {combined.server_errors}, "
        f"distinct failures {len(combined.failures)}"
    )
    for key, example in sorted(combined.failures.items()):
        print(f"  - {key}\n      {example[:200]}")


def _audited_home(home_parent: Path, *, corpus_images: int, split_images: int) -> Path:
    """Index generated photos (hash-only) and audit a split holding copies of some of them."""
    from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
    from splitaudit.indexer.demo import synthetic_photo
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.folder import FolderSource
    from splitaudit.indexer.sources.open import open_split
    from splitaudit.indexer.workspace import Workspace

    corpus, split, home = home_parent / "corpus", home_parent / "split", home_parent / "home"
    corpus.mkdir(parents=True)
    split.mkdir()
    for i in range(corpus_images):
        synthetic_photo(i, (320, 240)).save(corpus / f"c{i}.jpg", quality=90)
    for i in range(split_images):
        image = synthetic_photo(i if i % 2 == 0 else 10_000 + i, (320, 240))
        image.resize((256, 192)).save(split / f"t{i}.jpg", quality=85)
    ws = Workspace.open(home)
    try:
        index_sources(ws, "web", [FolderSource(corpus)], embedder=None)
        audit_id = create_audit(
            ws, split_id=create_split(ws, open_split(split), name="bench"), corpora=["web"]
        )
        run_audit(ws, audit_id)
    finally:
        ws.close()
    return home


def _serve(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    """uvicorn in its own process (the load clients must not share its GIL)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    env.update(SPLITAUDIT_HOME=str(home), SPLITAUDIT_RUN_WORKER="false", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "splitaudit.app.main:create_app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/api/v1/health", timeout=2).ok:
                return proc, url
        except requests.ConnectionError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start")


def _hammer(
    url_for: Callable[[int], str], *, clients: int, seconds: float
) -> tuple[list[float], int, int]:
    """``clients`` threads GET ``url_for(i)`` in a loop; latencies (s), errors, requests."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        session = requests.Session()
        i = n
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                ok = session.get(url_for(i), timeout=30).status_code < 400
            except requests.RequestException:
                ok = False
            latencies[n].append(time.perf_counter() - started)
            errors[n] += 0 if ok else 1
            i += clients

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [x for per in latencies for x in per]
    return flat, sum(errors), len(flat)


def _line(
    label: str, lat: list[float], errors: int, total: int, seconds: float, base_rps: float | None
) -> float:
    rps = total / seconds
    q = statistics.quantiles(lat, n=100) if len(lat) >= 100 else [max(lat, default=0.0)] * 99
    ratio = f"  ({rps / base_rps:.2f}x health)" if base_rps else ""
    print(
        f"{label:28s} {rps:8.1f} req/s  p50 {q[49] * 1000:7.1f} ms  p99 {q[98] * 1000:7.1f} ms  "
        f"errors {errors}/{total}{ratio}"
    )
    return rps


def load(tmp: Path, *, clients: int, seconds: float) -> None:
    """Concurrent clients on the report, matches and thumbnails of a real audit."""
    home = _audited_home(tmp / "load", corpus_images=40, split_images=20)
    proc, url = _serve(home)
    try:
        audit = requests.get(f"{url}/api/v1/audits", timeout=30).json()["items"][0]["id"]
        report = requests.get(f"{url}/api/v1/audits/{audit}/report", timeout=30).json()
        split_ids = [i["split_item_id"] for i in report["items"]]
        if not split_ids:
            raise RuntimeError(f"audit {audit} has no readable split items: {report.get('failed')}")
        item_ids = [
            m["corpus_item_id"]
            for i in report["items"]
            for m in i["matches"]
            if m.get("corpus_item_id")
        ]
        if not item_ids:
            raise RuntimeError(
                f"audit {audit} found no matches; the planted copies were not flagged"
            )
        print(
            f"audit {audit}: {len(split_ids)} split items, {len(item_ids)} matches; "
            f"{clients} clients x {seconds:.0f}s per endpoint"
        )
        lat, err, n = _hammer(lambda i: f"{url}/api/v1/health", clients=clients, seconds=seconds)
        base = _line("GET /health (baseline)", lat, err, n, seconds, None)
        endpoints: dict[str, Callable[[int], str]] = {
            "GET /audits/{id}/report": lambda i: f"{url}/api/v1/audits/{audit}/report",
            "GET /audits/{id}/matches": lambda i: (
                f"{url}/api/v1/audits/{audit}/matches?page={1 + i % 2}&page_size=10"
            ),
            "GET split-item thumbnails": lambda i: (
                f"{url}/api/v1/split-items/{split_ids[i % len(split_ids)]}/thumbnail?size={64 + 32 * (i % 4)}"
            ),
            "GET corpus-item thumbnails": lambda i: (
                f"{url}/api/v1/items/{item_ids[i % len(item_ids)]}/thumbnail"
            ),
        }
        mixed_paths = list(endpoints.values())
        for label, url_for in endpoints.items():
            lat, err, n = _hammer(url_for, clients=clients, seconds=seconds)
            _line(label, lat, err, n, seconds, base)
        lat, err, n = _hammer(
            lambda i: mixed_paths[i % len(mixed_paths)](i // len(mixed_paths)),
            clients=clients,
            seconds=seconds,
        )
        _line("mixed report/matches/thumbs", lat, err, n, seconds, base)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    """Run the campaign and the load test."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=20_000, help="fuzzing requests, both auth modes together"
    )
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0, help="load per endpoint")
    parser.add_argument("--skip-fuzz", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument(
        "--crash-seconds", type=float, default=600.0, help="crash campaign budget (0: skip)"
    )
    parser.add_argument("--crash-parallel", action="store_true", help="crash scenarios at once")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="splitaudit-hardening-") as tmp:
        if not args.skip_fuzz:
            campaign(Path(tmp), args.requests)
        if not args.skip_load:
            load(Path(tmp), clients=args.clients, seconds=args.seconds)
        if args.crash_seconds > 0:
            from bench.crash_campaign import campaign as crash_campaign

            crash_campaign(Path(tmp) / "crash", args.crash_seconds, parallel=args.crash_parallel)


if __name__ == "__main__":
    main()
