"""Corpus pages: every corpus with its counts, and one corpus's model, index and failed items."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from splitaudit.app.corpora import corpus_detail, list_corpora
from splitaudit.app.deps import SessionDep, WorkspaceDep
from splitaudit.app.params import PageQuery
from splitaudit.app.ui.rendering import UiDep, UiReaderDep, UiRoute

FAILED_PAGE_SIZE = 50


router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


@router.get("/corpora", include_in_schema=False)
def corpora_page(
    request: Request, session: SessionDep, ui: UiDep, _caller: UiReaderDep
) -> Response:
    """Every corpus: model, item and failure counts, generation."""
    return ui.page(
        request,
        "corpora.html",
        {"nav": "corpora", "title": "Corpora", "corpora": list_corpora(session)},
    )


@router.get("/corpora/{name}", include_in_schema=False)
def corpus_page(
    name: str,
    request: Request,
    session: SessionDep,
    ws: WorkspaceDep,
    ui: UiDep,
    _caller: UiReaderDep,
    page: PageQuery = 1,
) -> Response:
    """One corpus: counts, model, saved index, shards and a page of failed items with reasons."""
    corpus = corpus_detail(
        ws, session, name=name, failed_page=page, failed_page_size=FAILED_PAGE_SIZE
    )
    total = corpus["failed"]["total"]
    return ui.page(
        request,
        "corpus.html",
        {
            "nav": "corpora",
            "title": f"Corpus {name}",
            "corpus": corpus,
            "page": page,
            "pages": max(1, -(-total // FAILED_PAGE_SIZE)),
            "page_url": lambda p: f"/ui/corpora/{name}" + (f"?page={p}" if p > 1 else ""),
        },
    )
