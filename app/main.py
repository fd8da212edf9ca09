"""The FastAPI application factory: ``create_app(settings)``; nothing is built at import time.

Run it with ``splitaudit serve`` or ``uvicorn --factory app.main:create_app`` (settings
from ``SPLITAUDIT_*`` environment variables).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.api.router import build_api_router
from app.errors import install_error_handlers
from app.settings import ApiSettings
from indexer import __version__
from indexer.jobs.handlers import default_handlers
from indexer.jobs.worker import Worker
from indexer.workspace import Workspace

log = logging.getLogger(__name__)
UI_MODULE = "app.ui.router"


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """Build the app; the lifespan opens the workspace and starts the in-process job worker."""
    settings = settings if settings is not None else ApiSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ws = await run_in_threadpool(Workspace.open, settings.home, settings.database_url)
        app.state.workspace = ws
        worker: Worker | None = None
        if settings.run_worker:
            worker = Worker(ws, default_handlers(backend=settings.backend), lease_s=settings.job_lease_s, poll_s=settings.job_poll_s,
                            delay_s=settings.test_job_delay)
            worker.start()
        app.state.worker = worker
        log.info("splitaudit %s serving home %s (worker %s)", __version__, settings.home,
                 "on" if worker else "off")
        try:
            yield
        finally:
            if worker is not None:
                await run_in_threadpool(worker.stop, 30.0)
            ws.close()

    app = FastAPI(
        title="splitaudit",
        version=__version__,
        summary="Did your test split leak into your pretraining corpus?",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.worker = None
    install_error_handlers(app)
    app.include_router(build_api_router())
    has_ui = _include_ui(app, settings)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui" if has_ui else "/docs")

    return app


def _include_ui(app: FastAPI, settings: ApiSettings) -> bool:
    """Mount the review UI when ``app.ui.router`` exists (``build_router(settings)`` or ``router``)."""
    try:
        module = importlib.import_module(UI_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name in ("app.ui", UI_MODULE):
            return False
        raise
    build = getattr(module, "build_router", None)
    app.include_router(build(settings) if callable(build) else module.router)
    return True
