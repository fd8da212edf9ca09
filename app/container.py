"""Container entry point (the image's ENTRYPOINT; runs without Docker too).

``api``: wait for the database, migrate it, then serve on ``$SPLITAUDIT_PORT``.
``worker``: run queued jobs, touching a liveness file while its job loop runs.
``healthcheck [api|worker]``: exit 0 when this container's service is healthy: the API answers
``GET /api/v1/health`` with ``ok``; the worker's liveness file is fresh. Without an argument it
checks the role this container was started as (the image's one HEALTHCHECK serves both).
Anything else is handed to ``splitaudit`` (e.g. ``index /corpora/laion --corpus laion``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

# Variables read here on top of ApiSettings' SPLITAUDIT_* fields (name -> default).
ENTRYPOINT_ENV = {
    "SPLITAUDIT_PORT": "8000",
    "SPLITAUDIT_DB_WAIT_S": "60",
    # the worker's liveness file: rewritten every SPLITAUDIT_WORKER_BEAT_S while its job loop
    # runs; older than SPLITAUDIT_WORKER_STALE_S = unhealthy
    "SPLITAUDIT_WORKER_ALIVE_FILE": "/tmp/splitaudit-worker.alive",
    "SPLITAUDIT_WORKER_BEAT_S": "10",
    "SPLITAUDIT_WORKER_STALE_S": "60",
    # what this container runs (api, worker, or another command), written at start
    "SPLITAUDIT_ROLE_FILE": "/tmp/splitaudit-role",
}
WORKER_THREAD_PREFIX = "splitaudit-worker-"  # the job loop's thread (indexer/jobs/worker.py)


def _env(name: str) -> str:
    return os.environ.get(name) or ENTRYPOINT_ENV[name]


def migrate_when_reachable(
    wait_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Upgrade the configured database, retrying while it does not accept connections yet."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    from splitaudit.app.settings import ApiSettings
    from splitaudit.indexer.db.engine import sqlite_url
    from splitaudit.indexer.db.migrate import upgrade

    settings = ApiSettings()
    if not settings.database_url:
        settings.home.mkdir(parents=True, exist_ok=True)
    url = settings.database_url or sqlite_url(settings.home)
    shown = make_url(url).render_as_string(hide_password=True)
    deadline = clock() + wait_s
    while True:
        try:
            upgrade(url)
            return shown
        except OperationalError as exc:
            reason = str(exc.orig or exc).strip().splitlines()[0]
            if clock() >= deadline:
                raise SystemExit(
                    f"splitaudit: the database at {shown} did not accept connections within {wait_s:.0f}s "
                    f"({reason}); check SPLITAUDIT_DATABASE_URL and that the database is up, or raise "
                    "SPLITAUDIT_DB_WAIT_S"
                ) from exc
            print(
                f"splitaudit: waiting for the database at {shown}: {reason}",
                file=sys.stderr,
                flush=True,
            )
            sleep(2.0)


def healthcheck(port: str, timeout: float = 5.0) -> int:
    """0 when the API on ``port`` answers its health check with status ``ok``, else 1 (with why)."""
    url = f"http://127.0.0.1:{port}/api/v1/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    if body.get("status") != "ok":
        print(f"unhealthy: {body}", file=sys.stderr)
        return 1
    return 0


def worker_alive(path: Path, stale_s: float, *, now: Callable[[], float] = time.time) -> int:
    """0 when the worker's liveness file was written in the last ``stale_s`` seconds, else 1 (with why)."""
    try:
        beat = json.loads(path.read_text(encoding="utf-8"))
        age = now() - float(beat["time"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(
            f"unhealthy: no worker liveness file {path} ({exc}); is the worker running?",
            file=sys.stderr,
        )
        return 1
    if age > stale_s:
        print(
            f"unhealthy: the worker's job loop last reported {age:.0f}s ago (limit {stale_s:.0f}s)",
            file=sys.stderr,
        )
        return 1
    return 0


def _job_loop_running() -> bool:
    return any(
        t.name.startswith(WORKER_THREAD_PREFIX) and t.is_alive() for t in threading.enumerate()
    )


def beat_while_running(
    path: Path,
    interval_s: float,
    *,
    running: Callable[[], bool] = _job_loop_running,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """A daemon thread writing ``path`` every ``interval_s`` while ``running()`` (the job loop is alive).

    The file holds the time and the pid; it is replaced atomically, so a reader never sees half.
    """
    stop = stop or threading.Event()

    def beat() -> None:
        while not stop.is_set():
            if running():
                tmp = path.with_name(f".{path.name}.{os.getpid()}")
                try:
                    tmp.write_text(json.dumps({"time": time.time(), "pid": os.getpid()}))
                    os.replace(tmp, path)
                except OSError as exc:
                    print(f"splitaudit: cannot write {path}: {exc}", file=sys.stderr, flush=True)
            stop.wait(interval_s)

    thread = threading.Thread(target=beat, name="splitaudit-liveness", daemon=True)
    thread.start()
    return thread


def _record_role(role: str) -> None:
    # a read-only /tmp: healthcheck then checks the API, as before
    with contextlib.suppress(OSError):
        Path(_env("SPLITAUDIT_ROLE_FILE")).write_text(role, encoding="utf-8")


def _role() -> str:
    try:
        return Path(_env("SPLITAUDIT_ROLE_FILE")).read_text(encoding="utf-8").strip() or "api"
    except OSError:
        return "api"


def run_healthcheck(role: str | None) -> int:
    """The health of ``role`` (``api``, ``worker``; default: the role this container runs)."""
    role = role or _role()
    if role == "worker":
        return worker_alive(
            Path(_env("SPLITAUDIT_WORKER_ALIVE_FILE")), float(_env("SPLITAUDIT_WORKER_STALE_S"))
        )
    if role == "api":
        return healthcheck(_env("SPLITAUDIT_PORT"))
    return 0  # a one-off command (index, dedup, ...): nothing to probe


def _run_worker(args: Sequence[str]) -> int:
    """``splitaudit worker`` in this process, beside the thread that reports its liveness."""
    from splitaudit.indexer.cli.main import cli

    beat_while_running(
        Path(_env("SPLITAUDIT_WORKER_ALIVE_FILE")), float(_env("SPLITAUDIT_WORKER_BEAT_S"))
    )
    try:
        cli.main(["worker", *args], prog_name="splitaudit")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def _exec_splitaudit(args: Sequence[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "splitaudit.indexer.cli.main", *args])


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``api``, ``worker``, ``healthcheck`` or a splitaudit command."""
    args = list(sys.argv[1:] if argv is None else argv) or ["api"]
    command, rest = args[0], args[1:]
    if command == "healthcheck":
        return run_healthcheck(rest[0] if rest else None)
    _record_role(command if command in ("api", "worker") else "command")
    if command == "api":
        shown = migrate_when_reachable(float(_env("SPLITAUDIT_DB_WAIT_S")))
        print(
            f"splitaudit: database at {shown} is at the latest schema", file=sys.stderr, flush=True
        )
        _exec_splitaudit(["serve", "--host", "0.0.0.0", "--port", _env("SPLITAUDIT_PORT"), *rest])
    elif command == "worker":
        return _run_worker(rest)
    else:
        _exec_splitaudit(args)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
