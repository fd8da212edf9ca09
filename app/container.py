"""Container entry point (the image's ENTRYPOINT; runs without Docker too).

``api``: wait for the database, migrate it, then serve on ``$SPLITAUDIT_PORT``.
``worker``: run queued jobs. ``healthcheck``: exit 0 when ``GET /api/v1/health`` says ``ok``.
Anything else is handed to ``splitaudit`` (e.g. ``index /corpora/laion --corpus laion``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

# Variables read here on top of ApiSettings' SPLITAUDIT_* fields (name -> default).
ENTRYPOINT_ENV = {"SPLITAUDIT_PORT": "8000", "SPLITAUDIT_DB_WAIT_S": "60"}


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


def _exec_splitaudit(args: Sequence[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", "splitaudit.indexer.cli.main", *args])


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``api``, ``worker``, ``healthcheck`` or a splitaudit command."""
    args = list(sys.argv[1:] if argv is None else argv) or ["api"]
    command, rest = args[0], args[1:]
    if command == "healthcheck":
        return healthcheck(_env("SPLITAUDIT_PORT"))
    if command == "api":
        shown = migrate_when_reachable(float(_env("SPLITAUDIT_DB_WAIT_S")))
        print(
            f"splitaudit: database at {shown} is at the latest schema", file=sys.stderr, flush=True
        )
        _exec_splitaudit(["serve", "--host", "0.0.0.0", "--port", _env("SPLITAUDIT_PORT"), *rest])
    elif command == "worker":
        _exec_splitaudit(["worker", *rest])
    else:
        _exec_splitaudit(args)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
