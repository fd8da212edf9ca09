"""The ``/ui`` router: every page, the static files, and an HTML 404 for unknown UI paths."""

from __future__ import annotations

import mimetypes

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import FileResponse, RedirectResponse

from app.auth import Principal
from app.settings import ApiSettings
from app.ui.pages_audits import add_audit_pages
from app.ui.pages_corpora import add_corpus_pages
from app.ui.pages_dedup import add_dedup_pages
from app.ui.pages_review import add_review_pages
from app.ui.rendering import Ui, ui_route_class
from app.ui.templating import STATIC_DIR, build_templates
from indexer.errors import NotFoundError

STATIC_CACHE = "public, max-age=86400"


def build_router(settings: ApiSettings) -> APIRouter:
    """A fresh ``/ui`` router for an app built with ``settings``."""
    ui = Ui(templates=build_templates(settings), settings=settings)
    router = APIRouter(prefix="/ui", route_class=ui_route_class(ui), include_in_schema=False)
    add_audit_pages(router, ui)
    add_review_pages(router, ui)
    add_corpus_pages(router, ui)
    add_dedup_pages(router, ui)
    static_files = {p.name: p for p in STATIC_DIR.iterdir() if p.is_file()} if STATIC_DIR.is_dir() else {}

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        """A file of ``app/static`` (only names that exist there; no paths)."""
        path = static_files.get(name)
        if path is None:
            raise NotFoundError(f"no static file {name!r}")
        media = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if media.startswith("text/") or media == "application/javascript":
            media += "; charset=utf-8"
        return FileResponse(path, media_type=media, headers={"Cache-Control": STATIC_CACHE})

    @router.get("/{path:path}")
    def not_found(path: str, request: Request, _caller: Principal = Depends(ui.reader)) -> Response:
        """An HTML 404 for any other ``/ui`` path (``/ui/`` goes to the audits list)."""
        if not path:
            return RedirectResponse("/ui", status_code=307)
        return ui.error_page(request, status=404, title="Not found",
                             message=f"there is no page /ui/{path}; start from the audits list")

    return router
