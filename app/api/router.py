"""The ``/api/v1`` router: every resource router, with the error shape documented once."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from splitaudit.app.api.routes import (
    audits,
    corpora,
    decontaminate,
    dedup,
    health,
    items,
    jobs,
    matches,
)
from splitaudit.app.responses import error_responses

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = error_responses()


def build_api_router() -> APIRouter:
    """A fresh ``/api/v1`` router (built per app, never at import)."""
    api = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)
    for module in (health, corpora, audits, decontaminate, dedup, matches, items, jobs):
        api.include_router(module.router)
    return api
