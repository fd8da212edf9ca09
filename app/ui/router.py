"""The ``/ui`` router: every page and an HTML 404 for unknown UI paths; the static files app."""

from __future__ import annotations

import os

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from app.auth import Principal
from app.settings import ApiSettings
from app.ui.pages_audits import add_audit_pages
from app.ui.pages_corpora import add_corpus_pages
from app.ui.pages_review import add_review_pages
from app.ui.rendering import Ui, ui_route_class
from app.ui.templating import STATIC_DIR, build_templates

STATIC_PATH = "/ui/static"
STATIC_CACHE = "public, max-age=86400"


class UiStaticFiles(StaticFiles):
    """``app/static`` (ETag, 304, HEAD from Starlette), cached for a day: page URLs carry a content hash."""

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = STATIC_CACHE
        return response


def static_files() -> StaticFiles:
    """The app serving ``app/static`` (mount it at ``STATIC_PATH`` before the ``/ui`` router)."""
    return UiStaticFiles(directory=STATIC_DIR)


def build_router(settings: ApiSettings) -> APIRouter:
    """A fresh ``/ui`` router for an app built with ``settings``."""
    ui = Ui(templates=build_templates(settings), settings=settings)
    router = APIRouter(prefix="/ui", route_class=ui_route_class(ui), include_in_schema=False)
    add_audit_pages(router, ui)
    add_review_pages(router, ui)
    add_corpus_pages(router, ui)
    @router.get("/{path:path}")
    def not_found(path: str, request: Request, _caller: Principal = Depends(ui.reader)) -> Response:
        """An HTML 404 for any other ``/ui`` path (``/ui/`` goes to the audits list)."""
        if not path:
            return RedirectResponse("/ui", status_code=307)
        return ui.error_page(request, status=404, title="Not found",
                             message=f"there is no page /ui/{path}; start from the audits list")

    return router
