"""Rendering UI pages: the ``Ui`` bundle, HTML error pages, and who may read a page.

Library errors raised while building a page become an HTML error page with the status the
API would use (``splitaudit.app.errors.status_for``); a missing token becomes the token prompt page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.templating import Jinja2Templates

from splitaudit.app.auth import Principal, authenticate
from splitaudit.app.errors import status_for
from splitaudit.app.params import out_of_range_id
from splitaudit.app.settings import ApiSettings
from splitaudit.indexer.errors import AuthError, SplitauditError

log = logging.getLogger(__name__)
HTML_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@dataclass(frozen=True)
class Ui:
    """What every page handler needs: the templates and the server settings."""

    templates: Jinja2Templates
    settings: ApiSettings

    def page(
        self, request: Request, name: str, context: Mapping[str, Any], *, status: int = 200
    ) -> Response:
        """Render template ``name`` as a full page."""
        return self.templates.TemplateResponse(
            request, name, {"request": request, **context}, status_code=status, headers=HTML_HEADERS
        )

    def error_page(self, request: Request, *, status: int, title: str, message: str) -> Response:
        """The HTML error page."""
        return self.page(
            request,
            "error.html",
            {"title": title, "message": message, "status": status, "nav": ""},
            status=status,
        )

    def reader(self, request: Request) -> Principal:
        """The caller of a page; a token is needed only when the server requires one for reads."""
        settings = self.settings
        return authenticate(
            settings.api_tokens,
            request.headers.get("authorization"),
            required=settings.read_requires_token,
        )


def query_string(params: Mapping[str, Any], **override: Any) -> str:
    """``?a=1&b=2`` of the non-empty values of ``params`` updated by ``override`` ('' if none)."""
    merged = {**params, **override}
    pairs = [(k, v) for k, v in merged.items() if v not in (None, "")]
    return "?" + urlencode(pairs) if pairs else ""


_TITLES = {
    400: "Bad request",
    401: "Token needed",
    403: "Forbidden",
    404: "Not found",
    409: "Not ready",
    413: "Too large",
    422: "Invalid request",
}


def get_ui(request: Request) -> Ui:
    """The ``Ui`` of the app serving the request (``install_ui`` puts it on the app state)."""
    ui: Ui = request.app.state.ui
    return ui


UiDep = Annotated[Ui, Depends(get_ui)]


def ui_reader(request: Request, ui: UiDep) -> Principal:
    """The caller of a page (see ``Ui.reader``)."""
    return ui.reader(request)


UiReaderDep = Annotated[Principal, Depends(ui_reader)]


class UiRoute(APIRoute):
    """An ``APIRoute`` whose errors render as HTML pages instead of the API's JSON shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def render_errors(request: Request) -> Response:
            try:
                return await handler(request)
            except AuthError as exc:
                return get_ui(request).page(
                    request,
                    "auth_required.html",
                    {"message": str(exc), "nav": "", "title": "API token needed"},
                    status=401,
                )
            except SplitauditError as exc:
                status = status_for(exc)
                if status >= 500:
                    log.error("%s %s failed: %s", request.method, request.url.path, exc)
                return get_ui(request).error_page(
                    request, status=status, title=_TITLES.get(status, "Error"), message=str(exc)
                )
            except RequestValidationError as exc:
                missing = out_of_range_id(exc)
                if missing is not None:
                    return get_ui(request).error_page(
                        request, status=404, title="Not found", message=missing
                    )
                parts = []
                for err in exc.errors():
                    loc = [str(p) for p in err.get("loc", ()) if p not in ("query", "path")]
                    parts.append(f"{'.'.join(loc) or 'request'}: {err.get('msg', 'invalid')}")
                return get_ui(request).error_page(
                    request,
                    status=422,
                    title="Invalid request",
                    message="; ".join(parts) or "invalid request",
                )

        return render_errors
