"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) served from files shipped in a package: they work offline.

FastAPI's own pages load their scripts from a CDN, so on a machine without internet access
they stay blank. The same pages here point at ``/docs/assets/``, which serves the Swagger UI
bundle (Apache-2.0) and the ReDoc standalone bundle (MIT) that the ``fastapi-offline``
package (MIT) ships. No page requests anything outside the server (no Google Fonts either).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse

from splitaudit.indexer.errors import NotFoundError

__all__ = ["ASSETS", "ASSETS_URL", "assets_dir", "install_offline_docs"]

ASSETS_URL = "/docs/assets"
# file name -> media type: the only files the assets route serves
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}
_PACKAGE = "fastapi_offline"


def assets_dir() -> Path:
    """The folder holding the Swagger UI and ReDoc bundles (``fastapi_offline/static``)."""
    return Path(str(resources.files(_PACKAGE).joinpath("static")))


def install_offline_docs(app: FastAPI) -> None:
    """Add ``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and their assets to ``app``.

    Build the app with ``docs_url=None, redoc_url=None`` so FastAPI's CDN pages are not
    registered first.
    """
    router = APIRouter(include_in_schema=False)
    folder = assets_dir()
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    def openapi_url(request: Request) -> str:
        return f"{request.scope.get('root_path', '')}{app.openapi_url}"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_URL}/{name}"

    @router.get("/docs")
    def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url(request),
            title=f"{app.title} - Swagger UI",
            swagger_js_url=asset(request, "swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
            oauth2_redirect_url=redirect_url,
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @router.get(redirect_url)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @router.get("/redoc")
    def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url(request),
            title=f"{app.title} - ReDoc",
            redoc_js_url=asset(request, "redoc.standalone.js"),
            redoc_favicon_url=asset(request, "favicon.png"),
            with_google_fonts=False,
        )

    @router.get(ASSETS_URL + "/{name}")
    def docs_asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise NotFoundError(f"no docs asset {name!r}: the docs use {', '.join(ASSETS)}")
        return FileResponse(
            folder / name,
            media_type=media_type,
            headers={"Cache-Control": "public, max-age=86400"},
        )

    app.include_router(router)
