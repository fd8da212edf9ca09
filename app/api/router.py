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
from splitaudit.app.schemas import ErrorResponse

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in (
        (400, "Bad request"),
        (401, "Missing or invalid API token"),
        (403, "Path not allowed"),
        (404, "Not found"),
        (409, "Conflict with stored state"),
        (413, "Request body over SPLITAUDIT_MAX_JSON_MB (uploads: SPLITAUDIT_MAX_UPLOAD_MB)"),
        (422, "Invalid input"),
        (500, "Internal error (see the server log)"),
    )
}


def build_api_router() -> APIRouter:
    """A fresh ``/api/v1`` router (built per app, never at import)."""
    api = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)
    for module in (health, corpora, audits, decontaminate, dedup, matches, items, jobs):
        api.include_router(module.router)
    return api
