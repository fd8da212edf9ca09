"""ASGI middleware: a capped request body for everything but uploads, and a last-resort 500.

``BodyLimitMiddleware`` reads a request body up front, refusing it with 413 once it passes
``max_bytes`` (declared ``Content-Length`` or chunked alike), then replays it to the app; only
multipart uploads to the upload endpoint stream past it (they have their own limit). ``CatchAllMiddleware`` answers an unexpected exception with the JSON error shape and
*returns*: Starlette's own catch-all handler re-raises after answering, which makes the
server drop the keep-alive connection and reset the client's next request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from splitaudit.app.errors import error_body

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The one upload endpoint streams multipart bodies to disk under SPLITAUDIT_MAX_UPLOAD_MB itself.
UPLOAD_ROUTES = frozenset({("POST", "/api/v1/audits")})


async def send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send a whole JSON response."""
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def body_too_large_message(limit: int) -> str:
    """The 413 message for a JSON (non-upload) body over ``limit`` bytes."""
    return (
        f"request body over the limit of {limit / 1024 / 1024:g} MB (SPLITAUDIT_MAX_JSON_MB); "
        "list large splits in a manifest file on the server, or upload them as an archive"
    )


class BodyLimitMiddleware:
    """Refuse a request body over ``max_bytes`` with 413 before the app sees it (uploads excepted)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        ctype = (
            headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower().decode("latin-1")
        )
        if (
            ctype == "multipart/form-data"
            and (scope.get("method"), scope.get("path")) in UPLOAD_ROUTES
        ):
            await self.app(scope, receive, send)
            return
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        # Connection: close, since the rest of an oversized body is never read.
        await send_json(
            send,
            413,
            error_body("payload_too_large", body_too_large_message(self.max_bytes)),
            [(b"connection", b"close")],
        )


class CatchAllMiddleware:
    """Answer an unhandled exception with a 500 in the error shape, keeping the connection usable."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:  # half a response is out: nothing valid can follow on this connection
                raise
            message = f"internal error: {type(exc).__name__}; see the server log"
            await send_json(send, 500, error_body("internal_error", message))


# The UI's own scripts and styles only, thumbnails as data:/blob: images; the interactive API
# docs (/docs, /redoc) load Swagger UI / ReDoc from a CDN with inline scripts, so they get
# every header but this policy.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
DOCS_PATHS = ("/docs", "/redoc")


class SecurityHeadersMiddleware:
    """Add a strict Content-Security-Policy and the usual hardening headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        extra = list(SECURITY_HEADERS)
        if not path.startswith(DOCS_PATHS):
            extra.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *((k, v) for k, v in extra if k not in present),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


def is_network_address(server: Any) -> bool:
    """Whether an ASGI ``scope["server"]`` is a TCP address other than loopback.

    A unix socket (``None``) or a name that is not an IP address (a test client's
    ``testserver``) is local.
    """
    import ipaddress

    if not server:
        return False
    try:
        return not ipaddress.ip_address(str(server[0]).strip("[]")).is_loopback
    except ValueError:
        return False


ANONYMOUS_REFUSED = (
    "this server has no API tokens, so it only answers on a loopback address (127.0.0.1); "
    "set SPLITAUDIT_API_TOKENS=name:token (at least 16 characters) and send "
    "'Authorization: Bearer <token>', or set SPLITAUDIT_ALLOW_ANONYMOUS=true to serve "
    "everyone who can reach it"
)


class AnonymousExposureMiddleware:
    """Without API tokens, refuse (403) requests that arrived on a non-loopback address.

    The same rule ``splitaudit serve`` applies to ``--host``, enforced in the app itself so
    that ``uvicorn --factory ... --host 0.0.0.0`` cannot serve an open server by accident.
    ``/api/v1/health`` stays open for load balancers.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope.get("path") != "/api/v1/health"
            and is_network_address(scope.get("server"))
        ):
            await send_json(send, 403, error_body("anonymous_refused", ANONYMOUS_REFUSED))
            return
        await self.app(scope, receive, send)
