"""The FastAPI application factory: ``create_app(settings)``; nothing is built at import time.

Run it with ``splitaudit serve`` or ``uvicorn --factory splitaudit.app.main:create_app`` (settings
from ``SPLITAUDIT_*`` environment variables). Either way, without API tokens the app answers
only on loopback addresses unless ``SPLITAUDIT_ALLOW_ANONYMOUS`` is set.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from splitaudit.app.api.docs_offline import install_offline_docs
from splitaudit.app.api.router import build_api_router
from splitaudit.app.errors import install_error_handlers
from splitaudit.app.middleware import (
    AnonymousExposureMiddleware,
    BodyLimitMiddleware,
    CatchAllMiddleware,
    SecurityHeadersMiddleware,
)
from splitaudit.app.settings import ApiSettings
from splitaudit.app.ui.router import install_ui
from splitaudit.indexer import __version__
from splitaudit.indexer.cpus import limit_native_threads
from splitaudit.indexer.jobs.worker import Handler, Worker
from splitaudit.indexer.runtime.handlers import default_handlers
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)


def create_app(
    settings: ApiSettings | None = None, *, handlers: Mapping[str, Handler] | None = None
) -> FastAPI:
    """Build the app; the lifespan opens the workspace and starts the in-process job worker.

    ``handlers`` are what the in-process worker runs for each job kind (default: ``default_handlers(device=..., backend=...)`` from the settings).
    """
    settings = settings if settings is not None else ApiSettings()
    limit_native_threads()  # a container's CPU quota (or SPLITAUDIT_CPUS) for the native pools
    job_handlers = (
        dict(handlers)
        if handlers is not None
        else default_handlers(device=settings.device, backend=settings.backend)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ws = await run_in_threadpool(Workspace.open, settings.home, settings.database_url)
        app.state.workspace = ws
        worker: Worker | None = None
        if settings.run_worker:
            worker = Worker(
                ws, job_handlers, lease_s=settings.job_lease_s, poll_s=settings.job_poll_s
            )
            worker.start()
        app.state.worker = worker
        log.info(
            "splitaudit %s serving home %s (worker %s)",
            __version__,
            settings.home,
            "on" if worker else "off",
        )
        try:
            yield
        finally:
            if worker is not None:
                # A job that does not reach a progress report in time is handed back to the
                # queue (re-run at once by the next worker, not after its lease).
                await run_in_threadpool(worker.stop, settings.job_stop_grace_s)
            ws.close()

    app = FastAPI(
        title="splitaudit",
        version=__version__,
        summary="Did your test split leak into your pretraining corpus?",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from install_offline_docs: no CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.worker = None
    install_error_handlers(app)
    # add_middleware wraps: the last added runs first, so the catch-all sees every error.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_json_bytes)
    if not settings.auth_enabled and not settings.allow_anonymous:
        app.add_middleware(AnonymousExposureMiddleware)
    elif not settings.auth_enabled:
        log.warning(
            "serving WITHOUT API TOKENS on every address (SPLITAUDIT_ALLOW_ANONYMOUS): anyone who "
            "can reach this server can submit audits and read every report"
        )
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(CatchAllMiddleware)
    app.include_router(build_api_router())
    install_offline_docs(app)
    install_ui(app, settings)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui")

    return app
