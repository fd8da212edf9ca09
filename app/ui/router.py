"""The review UI: the ``/ui`` router (every page, an HTML 404 for unknown UI paths) and the static files."""

from __future__ import annotations

import os

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from splitaudit.app.settings import ApiSettings
from splitaudit.app.ui import pages_audits, pages_corpora, pages_dedup, pages_review
from splitaudit.app.ui.rendering import Ui, UiDep, UiReaderDep, UiRoute
from splitaudit.app.ui.templating import STATIC_DIR, build_templates
from splitaudit.indexer.kinds import tier_css

STATIC_PATH = "/ui/static"
STATIC_CACHE = "public, max-age=86400"


class UiStaticFiles(StaticFiles):
    """``app/static`` (ETag, 304, HEAD from Starlette), cached for a day: page URLs carry a content hash."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = STATIC_CACHE
        return response


# Every page module has its own ``/ui`` router; this one adds them up, then the catch-all 404.
router = APIRouter(route_class=UiRoute, include_in_schema=False)
router.include_router(pages_audits.router)
router.include_router(pages_review.router)
router.include_router(pages_corpora.router)
router.include_router(pages_dedup.router)


@router.get("/ui/tiers.css")
def tier_styles() -> Response:
    """The tiers' colours (badges, borders, chart fills), written from the tier registry."""
    return Response(
        tier_css(), media_type="text/css; charset=utf-8", headers={"Cache-Control": "max-age=3600"}
    )


@router.get("/ui/{path:path}")
def not_found(path: str, request: Request, ui: UiDep, _caller: UiReaderDep) -> Response:
    """An HTML 404 for any other ``/ui`` path (``/ui/`` goes to the audits list)."""
    if not path:
        return RedirectResponse("/ui", status_code=307)
    return ui.error_page(
        request,
        status=404,
        title="Not found",
        message=f"there is no page /ui/{path}; start from the audits list",
    )


def install_ui(app: FastAPI, settings: ApiSettings) -> None:
    """Serve the UI on ``app``: its ``Ui`` (templates, settings), the static files and the pages."""
    app.state.ui = Ui(templates=build_templates(settings), settings=settings)
    app.mount(
        STATIC_PATH, UiStaticFiles(directory=STATIC_DIR), name="ui-static"
    )  # before the /ui catch-all
    app.include_router(router)
