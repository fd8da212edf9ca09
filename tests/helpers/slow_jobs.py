"""A real server whose jobs are slow: the default job handlers, each progress report followed by a sleep.

Tests that must catch a job while it runs (kill the server mid-audit, watch a progress bar
fill) start ``uvicorn --factory helpers.slow_jobs:create_slow_app --app-dir tests``; the
settings come from ``SPLITAUDIT_*`` as usual and ``SLOW_JOB_DELAY_S`` sets the sleep.
"""

from __future__ import annotations

import os
import time

from fastapi import FastAPI

from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings
from splitaudit.indexer.jobs.queue import ClaimedJob
from splitaudit.indexer.jobs.worker import Handler, JobOutcome, ProgressFn
from splitaudit.indexer.runtime.handlers import default_handlers
from splitaudit.indexer.workspace import Workspace


def slowed(handler: Handler, delay_s: float) -> Handler:
    """``handler``, sleeping ``delay_s`` after each progress report it makes."""

    def run(ws: Workspace, job: ClaimedJob, progress: ProgressFn) -> JobOutcome | None:
        def report(fraction: float, message: str) -> None:
            progress(fraction, message)
            time.sleep(delay_s)

        return handler(ws, job, report)

    return run


def slow_handlers(delay_s: float) -> dict[str, Handler]:
    """Every default job handler, slowed by ``delay_s`` per progress report."""
    return {kind: slowed(handler, delay_s) for kind, handler in default_handlers().items()}


def create_slow_app() -> FastAPI:
    """The app with slow jobs (uvicorn ``--factory`` entry point)."""
    return create_app(
        ApiSettings(), handlers=slow_handlers(float(os.environ.get("SLOW_JOB_DELAY_S", "1.0")))
    )
