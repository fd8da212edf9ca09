"""The job queue: rows in ``job``, claimed under a lease that a heartbeat renews.

A worker claims the oldest job that is ``queued`` or ``running`` with an expired lease (its
worker died), so a killed server's jobs are picked up again. On PostgreSQL the candidate
row is locked with ``SELECT ... FOR UPDATE SKIP LOCKED``, so concurrent workers skip each
other's rows instead of waiting; on every backend the claim itself is a compare-and-set
``UPDATE`` (status / lease still as read), so two workers never run one job. SQLite is
meant for a single worker; the compare-and-set keeps even two of them correct.

Each claim counts an attempt. A job whose worker died ``max_attempts`` times is failed
rather than retried forever (it is probably what kills the worker).

A job run in the calling process (the CLI's local audit) is created *owned*
(``enqueue(..., owner=local_owner())``): ``running`` with that owner and no lease, so no
worker ever claims it. When that process dies, a worker starting on the same host fails
the job (``fail_orphaned_local``) instead of leaving it ``running`` forever.

This module is the only writer of ``job`` rows: workers go through ``claim_next`` /
``heartbeat`` / ``complete`` / ``fail``; a job run in the calling process (the CLI's local
audit) through ``mark_running`` / ``mark_done`` / ``mark_failed``. ``job_error_text`` is
what a failed job's ``error`` says: a short sentence, never SQL or a traceback.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Job
from splitaudit.indexer.errors import NotFoundError, SplitauditError
from splitaudit.indexer.kinds import JobStatus

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 60.0
DEFAULT_MAX_ATTEMPTS = 3
JOB_KINDS = ("audit", "index")
_MAX_ERROR_CHARS = 4000
_MAX_INTERNAL_CHARS = 200
LOCAL_PREFIX = "local:"


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job this worker holds the lease of."""

    id: int
    kind: str
    owner: str
    attempts: int
    params: dict[str, Any] = field(default_factory=dict)


def utc_now() -> datetime:
    """Timezone-aware UTC now (every lease time is UTC)."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """A stored timestamp as aware UTC (SQLite hands them back naive)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def local_owner() -> str:
    """The owner of jobs run in this process: ``local:HOST:PID`` (checked by ``fail_orphaned_local``)."""
    return f"{LOCAL_PREFIX}{socket.gethostname()}:{os.getpid()}"


def job_error_text(exc: BaseException) -> str:
    """What a failed job's ``error`` says: the library's own message, else a short sentence.

    Database errors carry whole SQL statements and parameters (kilobytes); internal errors
    may carry object reprs. Those go to the log, the job keeps one line.
    """
    if isinstance(exc, SplitauditError):
        return str(exc)[:_MAX_ERROR_CHARS] or type(exc).__name__
    if isinstance(exc, SQLAlchemyError):
        return (
            f"internal error: the database refused the operation ({type(exc).__name__}); "
            "the server log has the details. Run the job again; report it if it persists"
        )
    first = (str(exc).strip().splitlines() or [""])[0]
    if " object at 0x" in first:
        first = ""
    if len(first) > _MAX_INTERNAL_CHARS:
        first = first[: _MAX_INTERNAL_CHARS - 1] + "…"
    return f"internal error: {type(exc).__name__}" + (f": {first}" if first else "")


def enqueue(
    session: Session,
    *,
    kind: str,
    params: dict[str, Any] | None = None,
    owner: str | None = None,
) -> Job:
    """Add a job (flushed, not committed) and return it.

    Queued for a worker, or with ``owner`` (``local_owner()``) already running in that
    process: no lease, so no worker claims it.
    """
    job = Job(
        kind=kind, status=JobStatus.QUEUED, params=dict(params or {}), progress=0.0, attempts=0
    )
    if owner is not None:
        job.status, job.lease_owner, job.lease_expires_at = JobStatus.RUNNING, owner, None
        job.started_at, job.attempts = utc_now(), 1
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, *, job_id: int) -> Job:
    """The job ``job_id``; ``NotFoundError`` if there is none."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFoundError(f"job {job_id} does not exist; list audits with GET /api/v1/audits")
    return job


def _claimable(now: datetime) -> ColumnElement[bool]:
    return or_(
        Job.status == JobStatus.QUEUED,
        and_(
            Job.status == JobStatus.RUNNING,
            Job.lease_expires_at.is_not(None),
            Job.lease_expires_at < now,
        ),
    )


def claim_next(
    sessions: sessionmaker[Session],
    *,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    kinds: tuple[str, ...] = JOB_KINDS,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> ClaimedJob | None:
    """Claim the oldest runnable job for ``owner``; ``None`` when the queue is empty."""
    while True:
        with transaction(sessions) as s:
            now = utc_now()
            query = (
                select(Job).where(_claimable(now), Job.kind.in_(kinds)).order_by(Job.id).limit(1)
            )
            if s.get_bind().dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            job = s.scalars(query).first()
            if job is None:
                return None
            if job.status == JobStatus.RUNNING and job.attempts >= max_attempts:
                _give_up(s, job, now)
                continue
            result = s.execute(
                update(Job)
                .where(Job.id == job.id, _claimable(now), Job.attempts == job.attempts)
                .values(
                    status=JobStatus.RUNNING,
                    lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_s),
                    attempts=Job.attempts + 1,
                    started_at=job.started_at or now,
                    error=None,
                )
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                continue  # another worker won the race; look again
            log.info(
                "job %d (%s) claimed by %s, attempt %d", job.id, job.kind, owner, job.attempts + 1
            )
            return ClaimedJob(
                id=job.id,
                kind=job.kind,
                owner=owner,
                attempts=job.attempts + 1,
                params=dict(job.params or {}),
            )


def _give_up(session: Session, job: Job, now: datetime) -> None:
    """Fail a job whose workers keep dying instead of retrying it forever."""
    job.status = JobStatus.FAILED
    job.error = (
        f"the worker running this job stopped {job.attempts} times without finishing it "
        "(killed, out of memory?); check the server log, then submit it again"
    )
    job.finished_at = now
    job.lease_owner = None
    job.lease_expires_at = None
    log.warning("job %d failed after %d abandoned attempts", job.id, job.attempts)


def _owned(job_id: int, owner: str) -> ColumnElement[bool]:
    # Ownership is the lease owner alone, whatever the status.
    return and_(Job.id == job_id, Job.lease_owner == owner)


def _update_owned(sessions: sessionmaker[Session], job_id: int, owner: str, **values: Any) -> bool:
    with transaction(sessions) as s:
        result = s.execute(
            update(Job)
            .where(_owned(job_id, owner))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def heartbeat(
    sessions: sessionmaker[Session],
    *,
    job_id: int,
    owner: str,
    lease_s: float = DEFAULT_LEASE_S,
    progress: float | None = None,
    message: str | None = None,
) -> bool:
    """Renew the lease (and store progress); ``False`` when ``owner`` no longer holds the job."""
    values: dict[str, Any] = {"lease_expires_at": utc_now() + timedelta(seconds=lease_s)}
    if progress is not None:
        values["progress"] = min(max(float(progress), 0.0), 1.0)
    if message is not None:
        values["message"] = message[:_MAX_ERROR_CHARS]
    return _update_owned(sessions, job_id, owner, **values)


def complete(
    sessions: sessionmaker[Session],
    *,
    job_id: int,
    owner: str,
    message: str | None = None,
    result: dict[str, Any] | None = None,
) -> bool:
    """Mark the job done (``result`` is stored under ``params["result"]``); ``False`` if not held."""
    values: dict[str, Any] = {
        "status": JobStatus.DONE,
        "progress": 1.0,
        "finished_at": utc_now(),
        "lease_owner": None,
        "lease_expires_at": None,
        "error": None,
    }
    if message is not None:
        values["message"] = message[:_MAX_ERROR_CHARS]
    if result is not None:
        with sessions() as s:
            params = dict(get_job(s, job_id=job_id).params or {})
        values["params"] = params | {"result": result}
    return _update_owned(sessions, job_id, owner, **values)


def fail(sessions: sessionmaker[Session], *, job_id: int, owner: str, error: str) -> bool:
    """Mark the job failed with ``error``; ``False`` if ``owner`` no longer holds it."""
    return _update_owned(
        sessions,
        job_id,
        owner,
        status=JobStatus.FAILED,
        error=error[:_MAX_ERROR_CHARS] or "failed",
        finished_at=utc_now(),
        lease_owner=None,
        lease_expires_at=None,
    )


def release(sessions: sessionmaker[Session], *, job_id: int, owner: str) -> bool:
    """Put a held job back in the queue without counting the attempt (graceful shutdown)."""
    return _update_owned(
        sessions,
        job_id,
        owner,
        status=JobStatus.QUEUED,
        lease_owner=None,
        lease_expires_at=None,
        attempts=Job.attempts - 1,
        message="re-queued: the worker was shut down",
        error=None,
        finished_at=None,
    )


def requeue_expired(
    sessions: sessionmaker[Session], *, max_attempts: int = DEFAULT_MAX_ATTEMPTS
) -> int:
    """Re-queue running jobs whose lease expired (their worker died); returns how many."""
    now = utc_now()
    count = 0
    with transaction(sessions) as s:
        expired = s.scalars(
            select(Job)
            .where(Job.status == JobStatus.RUNNING, Job.lease_expires_at < now)
            .order_by(Job.id)
        ).all()
        for job in expired:
            if job.attempts >= max_attempts:
                _give_up(s, job, now)
                continue
            job.status = JobStatus.QUEUED
            job.lease_owner = None
            job.lease_expires_at = None
            job.message = f"re-queued after its worker stopped (attempt {job.attempts} abandoned)"
            count += 1
    if count:
        log.warning("re-queued %d job(s) whose worker stopped", count)
    fail_orphaned_local(sessions)
    return count


def _local_process_gone(owner: str | None) -> bool:
    """Whether ``owner`` is a ``local_owner()`` of this host whose process no longer exists."""
    if not owner or not owner.startswith(LOCAL_PREFIX):
        return False
    host, _, pid = owner[len(LOCAL_PREFIX) :].rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another host's process: nothing here can tell
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by another user
        return False
    return False


def fail_orphaned_local(sessions: sessionmaker[Session]) -> int:
    """Fail running local jobs (no lease) whose process on this host is gone; returns how many."""
    count = 0
    with transaction(sessions) as s:
        running = s.scalars(
            select(Job).where(
                Job.status == JobStatus.RUNNING,
                Job.lease_expires_at.is_(None),
                Job.lease_owner.like(f"{LOCAL_PREFIX}%"),
            )
        ).all()
        for job in running:
            if not _local_process_gone(job.lease_owner):
                continue
            job.status, job.finished_at = JobStatus.FAILED, utc_now()
            job.error = (
                "the process running this job locally stopped before it finished "
                "(killed or interrupted); run the command again"
            )
            job.lease_owner = None
            count += 1
    if count:
        log.warning("failed %d local job(s) whose process stopped", count)
    return count


def mark_running(sessions: sessionmaker[Session], *, job_id: int) -> None:
    """A job run in this process (no worker, no lease) has started; a worker never claims it."""
    with transaction(sessions) as s:
        job = get_job(s, job_id=job_id)
        if job.status != JobStatus.RUNNING:
            job.status, job.started_at = JobStatus.RUNNING, job.started_at or utc_now()
            job.lease_owner, job.lease_expires_at = local_owner(), None


def mark_done(sessions: sessionmaker[Session], *, job_id: int, message: str = "done") -> None:
    """A job run in this process has finished."""
    with transaction(sessions) as s:
        job = get_job(s, job_id=job_id)
        job.status, job.progress, job.finished_at, job.error = JobStatus.DONE, 1.0, utc_now(), None
        job.message = message[:_MAX_ERROR_CHARS]
        job.lease_owner, job.lease_expires_at = None, None


def mark_failed(sessions: sessionmaker[Session], *, job_id: int, error: str) -> None:
    """A job run in this process has failed with ``error``."""
    with transaction(sessions) as s:
        job = get_job(s, job_id=job_id)
        job.status, job.error, job.finished_at = (
            JobStatus.FAILED,
            error[:_MAX_ERROR_CHARS] or "failed",
            utc_now(),
        )
        job.lease_owner, job.lease_expires_at = None, None
