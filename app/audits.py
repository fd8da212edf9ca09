"""Read models of audits for the API: the paged list and one audit's status, progress and summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Query
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Audit, Job, Split
from splitaudit.indexer.errors import ConflictError, NotFoundError, UsageError
from splitaudit.indexer.kinds import JOB_STATUSES, JobStatus
from splitaudit.indexer.timefmt import iso

STATUSES = JOB_STATUSES
MAX_PAGE_SIZE = 500
FilterText = Annotated[str | None, Query(max_length=500)]


@dataclass(frozen=True)
class MatchFilters:
    """``kind``, ``review`` and ``label`` query parameters of an audit's pairs (a dependency:
    ``Annotated[MatchFilters, Depends()]``, shared by the matches API and the review UI)."""

    kind: FilterText = None
    review: FilterText = None
    label: FilterText = None

    def query(self) -> dict[str, str | None]:
        """Keyword arguments of ``list_matches`` (an empty value filters nothing)."""
        return {
            "kind": self.kind or None,
            "review": self.review or None,
            "label": self.label or None,
        }

    def form(self) -> dict[str, str]:
        """The values to show in the UI's filter form (empty for unset)."""
        return {"kind": self.kind or "", "label": self.label or "", "review": self.review or ""}


def audit_dict(audit: Audit, job: Job | None, split: Split) -> dict[str, Any]:
    """An audit's status (from its job), progress, summary and what it was run with."""
    if job is None:
        status: str
        status, progress = (JobStatus.DONE, 1.0) if audit.finished_at else (JobStatus.QUEUED, 0.0)
        message = error = None
    else:
        status, progress, message, error = (
            job.status,
            round(job.progress or 0.0, 4),
            job.message,
            job.error,
        )
    base = f"/api/v1/audits/{audit.id}"
    return {
        "id": audit.id,
        "status": status,
        "progress": progress,
        "message": message,
        "error": error,
        "attempts": job.attempts if job is not None else 0,
        "job_id": audit.job_id,
        "split": {"id": split.id, "name": split.name, "items": split.item_count},
        "corpora": list(audit.corpora or []),
        "thresholds": audit.thresholds or {},
        "summary": audit.summary or None,
        "model": audit.model or None,
        "code_version": audit.code_version,
        "created_at": iso(audit.created_at),
        "started_at": iso(job.started_at) if job is not None else None,
        "finished_at": iso(audit.finished_at or (job.finished_at if job is not None else None)),
        "links": {"self": base, "report": f"{base}/report", "matches": f"{base}/matches"},
    }


def get_audit(session: Session, *, audit_id: int) -> dict[str, Any]:
    """One audit as ``audit_dict``; ``NotFoundError`` if there is none."""
    row = session.execute(
        select(Audit, Job, Split)
        .outerjoin(Job, Audit.job_id == Job.id)
        .join(Split, Audit.split_id == Split.id)
        .where(Audit.id == audit_id)
    ).first()
    if row is None:
        raise NotFoundError(f"audit {audit_id} does not exist; list audits with GET /api/v1/audits")
    return audit_dict(*row)


def list_audits(
    session: Session, *, status: str | None = None, page: int = 1, page_size: int = 50
) -> tuple[list[dict[str, Any]], int]:
    """Audits, newest first, optionally of one status; and their total."""
    if page < 1 or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise UsageError(f"page must be >= 1 and page_size 1..{MAX_PAGE_SIZE}")
    query = (
        select(Audit, Job, Split)
        .outerjoin(Job, Audit.job_id == Job.id)
        .join(Split, Audit.split_id == Split.id)
    )
    if status is not None:
        if status not in STATUSES:
            raise UsageError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        query = query.where(Job.status == status)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.execute(
        query.order_by(Audit.id.desc()).limit(page_size).offset((page - 1) * page_size)
    ).all()
    return [audit_dict(*row) for row in rows], int(total)


def require_done(session: Session, *, audit_id: int) -> None:
    """``ConflictError`` unless the audit finished (a report of a running audit would be partial)."""
    audit = get_audit(session, audit_id=audit_id)
    if audit["status"] == "done":
        return
    if audit["status"] == "failed":
        raise ConflictError(
            f"audit {audit_id} failed: {audit['error']}; fix the cause and submit it again"
        )
    raise ConflictError(
        f"audit {audit_id} is {audit['status']} ({audit['progress']:.0%}); poll GET /api/v1/audits/{audit_id} "
        "until its status is done"
    )
