"""Dedup pages: a corpus's dedup runs, and one run's clusters with thumbnails, kept member and reviews."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import select

from splitaudit.app.deps import SessionDep
from splitaudit.app.params import IdPath, PageQuery
from splitaudit.app.ui.rendering import UiDep, UiReaderDep, UiRoute
from splitaudit.indexer.db.models import DedupRun
from splitaudit.indexer.db.queries import get_corpus

CLUSTER_PAGE_SIZE = 25

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


@router.get("/corpora/{name}/dedup", include_in_schema=False)
def dedup_runs_page(
    name: str, request: Request, session: SessionDep, ui: UiDep, _caller: UiReaderDep
) -> Response:
    """Every dedup run of a corpus, newest first."""
    from splitaudit.indexer.dedup.outputs import run_header

    corpus = get_corpus(session, name=name)
    ids = session.scalars(
        select(DedupRun.id).where(DedupRun.corpus_id == corpus.id).order_by(DedupRun.id.desc())
    )
    runs = [run_header(session, run_id) for run_id in ids]
    return ui.page(
        request,
        "dedup_runs.html",
        {"nav": "corpora", "title": f"Dedup runs of {name}", "corpus": name, "runs": runs},
    )


@router.get("/dedup/{run_id}", include_in_schema=False)
def dedup_page(
    run_id: IdPath,
    request: Request,
    session: SessionDep,
    ui: UiDep,
    _caller: UiReaderDep,
    page: PageQuery = 1,
    semantic: bool = False,
) -> Response:
    """One run: summary, then a page of clusters (thumbnails, kept member marked, member reviews)."""
    from splitaudit.indexer.dedup.outputs import clusters_page, run_header

    run = run_header(session, run_id)
    clusters: list[dict[str, Any]] = []
    total = 0
    if run["status"] == "done":
        clusters, total = clusters_page(
            session,
            run_id,
            semantic=semantic,
            offset=(page - 1) * CLUSTER_PAGE_SIZE,
            limit=CLUSTER_PAGE_SIZE,
        )
    suffix = "&semantic=true" if semantic else ""
    return ui.page(
        request,
        "dedup.html",
        {
            "nav": "corpora",
            "title": f"Dedup {run_id} of {run['corpus']}",
            "run": run,
            "clusters": clusters,
            "total": total,
            "page": page,
            "pages": max(1, -(-total // CLUSTER_PAGE_SIZE)),
            "semantic": semantic,
            "page_url": lambda p: f"/ui/dedup/{run_id}?page={p}{suffix}",
        },
    )
