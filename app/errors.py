"""The one error shape of the API, ``{"error": {"code", "message"}}``, for every failure.

Library errors (``SplitauditError`` subclasses) carry their own HTTP status
(``indexer/errors.py``); FastAPI's validation errors, unknown routes / methods and
unexpected exceptions get the same shape.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError as DatabaseDataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from splitaudit.app.excerpt import clip_message, excerpt
from splitaudit.app.params import out_of_range_id
from splitaudit.indexer.errors import AuthError, SplitauditError

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "upload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
}


def status_for(exc: SplitauditError) -> int:
    """The HTTP status of a library error: the class's own ``http_status``."""
    return exc.http_status


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The error document."""
    return {"error": {"code": code, "message": message, **extra}}


def _describe_validation(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    details = []
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "header")]
        where = ".".join(loc) or "request"
        msg = str(err.get("msg", "invalid"))
        parts.append(f"{where}: {msg}")
        details.append({"field": where, "message": msg})
    return "invalid request: " + "; ".join(parts) if parts else "invalid request", details


async def handle_error(request: Request, exc: Exception) -> JSONResponse:
    """Turn any exception into the JSON error shape with the right status."""
    headers: dict[str, str] = {}
    if isinstance(exc, SplitauditError):
        status = status_for(exc)
        body = error_body(exc.code, str(exc) or exc.__class__.__doc__ or exc.code)
        if isinstance(exc, AuthError):
            headers["WWW-Authenticate"] = 'Bearer realm="splitaudit"'
        if status >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc)
    elif isinstance(exc, DatabaseDataError):
        # A value the database refuses to store or compare (PostgreSQL: a NUL character in text):
        # the request's fault, answered like any other bad parameter; nothing was written.
        status = 400
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        body = error_body(
            "bad_request",
            f"the database refused a value of this request ({excerpt(reason, 160)}); "
            "remove NUL characters from the text you send",
        )
    elif isinstance(exc, RequestValidationError) and (missing := out_of_range_id(exc)) is not None:
        status = 404
        body = error_body("not_found", missing)
    elif isinstance(exc, RequestValidationError):
        status = 422
        message, details = _describe_validation(exc)
        body = error_body("invalid_request", message, details=details)
    elif isinstance(exc, StarletteHTTPException):
        status = exc.status_code
        if status == 404 and exc.detail in (None, "Not Found"):
            message = (
                f"no such endpoint: {request.method} {request.url.path}; see /docs for the API"
            )
        elif status == 405:
            message = f"method {request.method} is not allowed on {request.url.path}; see /docs"
        else:
            message = str(exc.detail)
        body = error_body(_HTTP_CODES.get(status, f"http_{status}"), message)
        headers.update(exc.headers or {})
    else:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        status = 500
        body = error_body(
            "internal_error", f"internal error: {type(exc).__name__}; see the server log"
        )
    body["error"]["message"] = clip_message(str(body["error"]["message"]))
    return JSONResponse(body, status_code=status, headers=headers or None)


def install_error_handlers(app: FastAPI) -> None:
    """Route every error through ``handle_error``.

    Unexpected exceptions are answered by ``app.middleware.CatchAllMiddleware`` (installed by
    ``create_app``), not by an ``Exception`` handler: Starlette re-raises after such a handler
    answers, which drops the client's keep-alive connection.
    """
    for exc_class in (
        SplitauditError,
        RequestValidationError,
        StarletteHTTPException,
        DatabaseDataError,
    ):
        app.add_exception_handler(exc_class, handle_error)
