"""``GET /health``: liveness, database reachability, worker state."""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, Request
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from splitaudit.app.deps import WorkspaceDep
from splitaudit.app.schemas import Health
from splitaudit.indexer import __version__

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


@router.get("/health", response_model=Health)
def health(request: Request, ws: WorkspaceDep) -> Health:
    """Is the server up, can it reach its database, is its job worker running."""
    try:
        with ws.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        database = "ok"
    except SQLAlchemyError as exc:
        log.warning("health check: database unreachable: %s", exc)
        database = "unreachable"
    worker = getattr(request.app.state, "worker", None)
    worker_state: Literal["running", "stopped", "off"] = (
        "off" if worker is None else "running" if worker.is_running else "stopped"
    )
    healthy = database == "ok" and worker_state != "stopped"
    return Health(
        status="ok" if healthy else "degraded",
        version=__version__,
        database=database,
        worker=worker_state,
    )
