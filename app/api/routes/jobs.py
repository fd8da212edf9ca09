"""Jobs: status of background work (index runs; audits are also reachable as ``/audits/{id}``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import func, select

from splitaudit.app.deps import ReaderDep, SessionDep
from splitaudit.app.params import IdPath, PageQuery, PageSizeQuery
from splitaudit.app.schemas import JobOut, Page
from splitaudit.indexer.db.models import Audit, Job
from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.jobs.queue import get_job
from splitaudit.indexer.kinds import JOB_STATUSES
from splitaudit.indexer.timefmt import iso

router = APIRouter(prefix="/jobs", tags=["jobs"])
STATUSES = JOB_STATUSES


def job_dict(job: Job, audit_id: int | None) -> dict[str, Any]:
    """A job row as JSON."""
    params = dict(job.params or {})
    result = params.pop("result", None)
    return {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "progress": round(job.progress or 0.0, 4),
        "message": job.message,
        "error": job.error,
        "attempts": job.attempts,
        "params": params,
        "result": result,
        "audit_id": audit_id,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
    }


@router.get("", response_model=Page[JobOut], response_model_exclude_unset=True)
def job_list(
    session: SessionDep,
    _caller: ReaderDep,
    status_filter: Annotated[str | None, Query(alias="status")] = None,
    kind: str | None = None,
    page: PageQuery = 1,
    page_size: PageSizeQuery = 50,
) -> dict[str, Any]:
    """Jobs, newest first."""
    query = select(Job, Audit.id).outerjoin(Audit, Audit.job_id == Job.id)
    if status_filter is not None:
        if status_filter not in STATUSES:
            raise UsageError(f"unknown status {status_filter!r}; use one of {', '.join(STATUSES)}")
        query = query.where(Job.status == status_filter)
    if kind is not None:
        query = query.where(Job.kind == kind)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.execute(
        query.order_by(Job.id.desc()).limit(page_size).offset((page - 1) * page_size)
    ).all()
    return {
        "items": [job_dict(j, a) for j, a in rows],
        "total": int(total),
        "page": page,
        "page_size": page_size,
    }


@router.get("/{job_id}", response_model=JobOut, response_model_exclude_unset=True)
def job_get(job_id: IdPath, session: SessionDep, _caller: ReaderDep) -> dict[str, Any]:
    """One job: status, progress, message, error, attempts, and the result of an index run."""
    job = get_job(session, job_id=job_id)
    audit_id = session.scalar(select(Audit.id).where(Audit.job_id == job.id))
    return job_dict(job, audit_id)
