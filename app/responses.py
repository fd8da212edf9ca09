"""What routes answer besides their JSON models: the error shape, and the media types of text and image routes."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response

from splitaudit.app.schemas import ErrorResponse

# Every error is JSON ``{"error": {"code", "message"}}`` (app/errors.py), whatever the route serves.
ERROR_STATUSES: tuple[tuple[int, str], ...] = (
    (400, "Bad request"),
    (401, "Missing or invalid API token"),
    (403, "Path not allowed"),
    (404, "Not found"),
    (409, "Conflict with stored state"),
    (413, "Request body over SPLITAUDIT_MAX_JSON_MB (uploads: SPLITAUDIT_MAX_UPLOAD_MB)"),
    (422, "Invalid input"),
    (500, "Internal error (see the server log)"),
)
_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


class CsvResponse(Response):
    """A CSV body (``text/csv``)."""

    media_type = "text/csv"


class TextResponse(Response):
    """A plain-text body (``text/plain``)."""

    media_type = "text/plain"


class ImageResponse(Response):
    """An image body (a JPEG or PNG thumbnail)."""

    media_type = "image/jpeg"


def error_responses() -> dict[int | str, dict[str, Any]]:
    """``responses=`` of the API router: the error shape, documented once for every route."""
    return {s: {"model": ErrorResponse, "description": text} for s, text in ERROR_STATUSES}


def also(*media_types: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a text or image route: the other media types its 200 may carry, and its
    errors documented as JSON (FastAPI would file them under the route's own media type)."""
    out: dict[int | str, dict[str, Any]] = {
        s: {"description": text, "content": {"application/json": {"schema": _ERROR_REF}}}
        for s, text in ERROR_STATUSES
    }
    out[200] = {"description": "Successful Response", "content": {t: {} for t in media_types}}
    return out
