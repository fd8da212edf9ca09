"""Dedup: deduplicate a corpus as a job, page through its clusters, review members, get the drop list."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from splitaudit.app.deps import ReaderDep, SessionDep, TransactionDep, WorkspaceDep, WriterDep
from splitaudit.app.params import IdPath, PageQuery, PageSizeQuery
from splitaudit.app.responses import TextResponse, also
from splitaudit.app.schemas import (
    DedupClusterOut,
    DedupRunOut,
    JobAccepted,
    MemberReviewOut,
    Page,
)
from splitaudit.indexer.db.models import DedupRun
from splitaudit.indexer.dedup.keep import DEFAULT_POLICY
from splitaudit.indexer.errors import ConflictError

router = APIRouter(tags=["dedup"])


class DedupCreate(BaseModel):
    """``POST /corpora/{name}/dedup``: how to keep one member per cluster, and optional tiers."""

    model_config = {"extra": "forbid"}

    keep: str = Field(DEFAULT_POLICY, description="largest|smallest|first|last|oldest|newest")
    semantic: bool = Field(
        False, description="Also report semantic clusters (never in the drop list)."
    )
    thresholds: dict[str, int | float] = Field(
        default_factory=dict, description="Threshold overrides, as for audits."
    )


class MemberReview(BaseModel):
    """``PUT /dedup/{id}/members/{item_id}/review``."""

    model_config = {"extra": "forbid"}

    verdict: Literal["duplicate", "not_duplicate", "unsure"]
    note: str | None = Field(None, max_length=4000)


def require_done(session: Session, run_id: int) -> dict[str, Any]:
    """The run's header; ``ConflictError`` unless it finished."""
    from splitaudit.indexer.dedup.outputs import run_header

    header = run_header(session, run_id)
    if header["status"] == "failed":
        raise ConflictError(
            f"dedup {run_id} failed: {header['error']}; fix the cause and submit it again"
        )
    if header["status"] != "done":
        raise ConflictError(
            f"dedup {run_id} is {header['status']}; poll GET /api/v1/dedup/{run_id} until it is done"
        )
    return header


@router.post(
    "/corpora/{name}/dedup", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted
)
def dedup_submit(
    name: str, ws: WorkspaceDep, _caller: WriterDep, body: DedupCreate | None = None
) -> JSONResponse:
    """Deduplicate a corpus as a background job: exact and near pairs, clusters, a kept member each."""
    from splitaudit.indexer.dedup.service import create_dedup

    body = body or DedupCreate.model_validate({})
    run_id = create_dedup(
        ws,
        corpus=name,
        keep=body.keep,
        semantic=body.semantic,
        thresholds=body.thresholds,
        as_job=True,
    )
    with ws.sessions() as s:
        job_id = s.get_one(DedupRun, run_id).job_id
    accepted = JobAccepted(
        id=run_id,
        job_id=job_id,
        status="queued",
        kind="dedup",
        links={
            "self": f"/api/v1/dedup/{run_id}",
            "job": f"/api/v1/jobs/{job_id}",
            "clusters": f"/api/v1/dedup/{run_id}/clusters",
        },
    )
    return JSONResponse(
        accepted.model_dump(),
        status_code=status.HTTP_202_ACCEPTED,
        headers={"Location": f"/api/v1/dedup/{run_id}"},
    )


@router.get("/dedup/{run_id}", response_model=DedupRunOut, response_model_exclude_unset=True)
def dedup_get(run_id: IdPath, session: SessionDep, _caller: ReaderDep) -> dict[str, Any]:
    """Status, progress, parameters and summary of one dedup run."""
    from splitaudit.indexer.dedup.outputs import run_header

    return run_header(session, run_id)


@router.get(
    "/dedup/{run_id}/clusters",
    response_model=Page[DedupClusterOut],
    response_model_exclude_unset=True,
)
def dedup_clusters(
    run_id: IdPath,
    session: SessionDep,
    _caller: ReaderDep,
    semantic: bool = False,
    page: PageQuery = 1,
    page_size: PageSizeQuery = 50,
) -> dict[str, Any]:
    """One page of a finished run's clusters (``semantic=true``: the semantic clusters)."""
    from splitaudit.indexer.dedup.outputs import clusters_page

    require_done(session, run_id)
    items, total = clusters_page(
        session, run_id, semantic=semantic, offset=(page - 1) * page_size, limit=page_size
    )
    return {"items": items, "total": total, "page": page, "page_size": page_size}


@router.get("/dedup/{run_id}/drop-list", response_class=TextResponse, responses=also("text/csv"))
def dedup_drop_list(
    run_id: IdPath,
    session: SessionDep,
    _caller: ReaderDep,
    fmt: Annotated[str, Query(alias="format", pattern="^(txt|csv)$")] = "txt",
) -> Response:
    """The keys to drop (every member but the kept one): one per line, or CSV ``key,url``."""
    from splitaudit.indexer.dedup.outputs import drop_rows, render_csv

    require_done(session, run_id)
    rows = drop_rows(session, run_id)
    if fmt == "txt":
        return Response("".join(f"{k}\n" for k, _ in rows), media_type="text/plain; charset=utf-8")
    return Response(
        render_csv(({"key": k, "url": u} for k, u in rows), ("key", "url")),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'inline; filename="dedup-{run_id}-drop.csv"'},
    )


@router.put(
    "/dedup/{run_id}/members/{item_id}/review",
    response_model=MemberReviewOut,
    response_model_exclude_unset=True,
)
def dedup_member_review(
    run_id: IdPath, item_id: IdPath, body: MemberReview, session: TransactionDep, caller: WriterDep
) -> dict[str, Any]:
    """Judge a cluster member (``not_duplicate``: it leaves the cluster on the next run)."""
    from splitaudit.indexer.dedup.reviews import review_member

    require_done(session, run_id)
    return review_member(
        session,
        run_id=run_id,
        item_id=item_id,
        verdict=body.verdict,
        note=body.note,
        reviewer=caller.name,
    )
