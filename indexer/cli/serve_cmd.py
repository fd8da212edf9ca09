"""``splitaudit serve`` (the REST API + review UI, with an in-process job worker) and ``splitaudit worker``."""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from splitaudit.indexer.cli.backend_option import backend_option
from splitaudit.indexer.cli.common import handle_errors, home_option
from splitaudit.indexer.cli.device_option import device_option, resolve_cli_device
from splitaudit.indexer.embed.backends import resolve_backend
from splitaudit.indexer.errors import UsageError

# How long a stopping worker waits for its job to reach a progress report before handing the
# job back and exiting (the job resumes from what it committed).
STOP_GRACE_S = 10.0


def _settings(**overrides: Any) -> Any:
    """``ApiSettings`` from the environment plus the command-line overrides."""
    from pydantic import ValidationError

    from splitaudit.app.settings import ApiSettings

    try:
        return ApiSettings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"SPLITAUDIT_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise UsageError(f"invalid server settings: {problems}") from exc


def _open_workspace(settings: Any) -> Any:
    """Open the workspace, turning an unusable database URL into a usage error (exit 2)."""
    from sqlalchemy.exc import SQLAlchemyError

    from splitaudit.indexer.db.engine import make_engine
    from splitaudit.indexer.workspace import Workspace

    if settings.database_url:
        make_engine(settings.database_url).dispose()  # refuses unsupported schemes first
    try:
        return Workspace.open(settings.home, settings.database_url)
    except SQLAlchemyError as exc:
        where = (settings.database_url or "").split("@")[-1] or str(settings.home)
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise UsageError(
            f"cannot open the database at {where}: {reason}; check SPLITAUDIT_DATABASE_URL and that the "
            "server is running"
        ) from exc


def is_loopback_host(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name may resolve to any interface


def check_exposure(settings: Any, host: str, *, allow_anonymous: bool) -> str | None:
    """Refuse to expose a server without API tokens; the loud warning to print when allowed."""
    if settings.auth_enabled or is_loopback_host(host):
        return None
    if not allow_anonymous:
        raise UsageError(
            f"refusing to listen on {host} without API tokens: anyone who can reach it could submit "
            "audits and read every report. Set SPLITAUDIT_API_TOKENS=name:token, bind 127.0.0.1, "
            "or pass --allow-anonymous to serve it open on purpose"
        )
    return (
        f"WARNING: serving on {host} WITHOUT API TOKENS (--allow-anonymous): anyone who can reach "
        "this address can submit audits, record reviews and read every report and image"
    )


@click.command()
@home_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0 for all).",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="TCP port."
)
@click.option(
    "--no-worker",
    is_flag=True,
    help="Do not run jobs in this process; run `splitaudit worker` next to it instead.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Server log level.",
)
@click.option(
    "--allow-anonymous",
    is_flag=True,
    help="Serve a non-loopback --host without SPLITAUDIT_API_TOKENS (refused otherwise).",
)
@device_option
@backend_option
@handle_errors
def serve(
    home: Path,
    host: str,
    port: int,
    no_worker: bool,
    log_level: str,
    allow_anonymous: bool,
    device: str,
    backend: str,
) -> None:
    """Start the audit server: REST API at /api/v1 (OpenAPI at /docs) and the review UI.

    Configure with SPLITAUDIT_* variables: SPLITAUDIT_DATABASE_URL (PostgreSQL),
    SPLITAUDIT_API_TOKENS (name:token,...), SPLITAUDIT_SOURCE_ROOTS (server folders
    manifests may read), SPLITAUDIT_MAX_UPLOAD_MB, SPLITAUDIT_MAX_JSON_MB. With tokens, reads
    need one too unless SPLITAUDIT_PUBLIC_READ=true. A --host other than loopback needs tokens
    or --allow-anonymous. Killed audits resume on restart.
    """
    import uvicorn

    from splitaudit.app.main import create_app

    # --no-worker wins; otherwise SPLITAUDIT_RUN_WORKER (default true) decides.
    settings = _settings(home=home, backend=backend, **({"run_worker": False} if no_worker else {}))
    allow_anonymous = allow_anonymous or settings.allow_anonymous
    warning = check_exposure(settings, host, allow_anonymous=allow_anonymous)
    if allow_anonymous:  # the app enforces the same rule per request (create_app)
        settings = settings.model_copy(update={"allow_anonymous": True})
    resolve_backend(settings.backend)  # an uninstalled backend: exit 2 before serving
    _open_workspace(settings).close()  # fail fast with a clear error, before uvicorn starts
    jobs = "jobs need `splitaudit worker`"
    if settings.run_worker:
        resolved = resolve_cli_device(
            device
        )  # an absent device is a usage error before uvicorn starts
        settings = settings.model_copy(update={"device": resolved.device})
        jobs = f"jobs embed on {resolved.summary()}"
    if warning:
        click.secho(warning, err=True, fg="red", bold=True)
    click.echo(
        f"splitaudit serving {settings.home} on http://{host}:{port} (API docs at /docs; {jobs})",
        err=True,
    )
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)


@click.command()
@home_option
@click.option(
    "--poll",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between looks at the queue when it is empty.",
)
@device_option
@backend_option
@handle_errors
def worker(home: Path, poll: float, device: str, backend: str) -> None:
    """Run queued jobs (audits, server-side index runs) until stopped (Ctrl-C / SIGTERM).

    Several workers may share one PostgreSQL database; with SQLite run a single worker
    (and start `splitaudit serve --no-worker`). A job whose worker dies is re-run by
    another one once its lease (SPLITAUDIT_JOB_LEASE_S) expires.
    """
    from splitaudit.indexer.jobs.worker import Worker
    from splitaudit.indexer.runtime.handlers import default_handlers

    settings = _settings(home=home, backend=backend)
    resolved = resolve_cli_device(
        device
    )  # an absent device is a usage error before any job is claimed
    resolve_backend(
        settings.backend, resolved.device
    )  # an uninstalled backend: exit 2 before taking jobs
    ws = _open_workspace(settings)
    runner = Worker(
        ws,
        default_handlers(device=resolved.device, backend=settings.backend),
        lease_s=settings.job_lease_s,
        poll_s=poll,
    )
    if ws.database_url.startswith("sqlite"):
        click.echo(
            "note: SQLite database: run only one worker, and the server with --no-worker", err=True
        )

    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        click.echo(
            f"{signal.Signals(signum).name}: stopping; the running job goes back to the queue",
            err=True,
        )
        runner.request_stop()
        stopping.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    click.echo(
        f"worker {runner.owner} waiting for jobs in {ws.database_url.split('@')[-1]}; "
        f"embedding on {resolved.summary()}",
        err=True,
    )
    # The jobs run in a thread so that this (main) thread handles signals at once, even while
    # a job sits in a long C call (opening a big index) that would defer a Python handler.
    thread = runner.start()
    try:
        while thread.is_alive() and not stopping.wait(0.5):
            pass
        finished = runner.stop(STOP_GRACE_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    ws.close()
    if not finished:
        # The job was handed back; its thread cannot be interrupted, so leave without it.
        click.echo("worker stopped (a job busy in native code was handed back)", err=True)
        sys.stderr.flush()
        os._exit(0)
