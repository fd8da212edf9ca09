"""The job queue: claims, leases, heartbeats, re-queueing, attempts, and no double claims."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, update

from splitaudit.indexer.db.engine import make_engine, make_session_factory, transaction
from splitaudit.indexer.db.models import Base, Job
from splitaudit.indexer.errors import NotFoundError
from splitaudit.indexer.jobs.queue import (
    claim_next,
    complete,
    enqueue,
    fail,
    get_job,
    heartbeat,
    release,
    requeue_expired,
    utc_now,
)
from splitaudit.indexer.workspace import Workspace


def _workspace(tmp_path: Path) -> Workspace:
    """A workspace on a fresh SQLite file with the schema created directly (fast, no Alembic)."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    return Workspace(
        home=tmp_path, database_url=url, engine=engine, sessions=make_session_factory(engine)
    )


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = _workspace(tmp_path)
    yield workspace
    workspace.close()


def _add(ws: Workspace, kind: str = "audit", **params: object) -> int:
    with transaction(ws.sessions) as s:
        return enqueue(s, kind=kind, params=dict(params)).id


def _job(ws: Workspace, job_id: int) -> Job:
    with ws.sessions() as s:
        return get_job(s, job_id=job_id)


def _expire(ws: Workspace, job_id: int) -> None:
    with transaction(ws.sessions) as s:
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(lease_expires_at=utc_now() - timedelta(seconds=5))
        )


def test_claim_takes_oldest_queued_job_and_sets_lease(ws: Workspace) -> None:
    first, second = _add(ws, n=1), _add(ws, n=2)
    claimed = claim_next(ws.sessions, owner="w1", lease_s=30)
    assert claimed is not None
    assert (claimed.id, claimed.attempts, claimed.params) == (first, 1, {"n": 1})
    row = _job(ws, first)
    assert row.status == "running" and row.lease_owner == "w1" and row.started_at is not None
    assert row.lease_expires_at is not None
    again = claim_next(ws.sessions, owner="w2")
    assert again is not None and again.id == second
    assert claim_next(ws.sessions, owner="w3") is None


def test_claim_respects_kinds(ws: Workspace) -> None:
    _add(ws, kind="index")
    assert claim_next(ws.sessions, owner="w", kinds=("audit",)) is None
    claimed = claim_next(ws.sessions, owner="w", kinds=("index",))
    assert claimed is not None and claimed.kind == "index"


def test_expired_lease_is_claimed_again_and_old_owner_loses_it(ws: Workspace) -> None:
    job_id = _add(ws)
    assert claim_next(ws.sessions, owner="dead", lease_s=30) is not None
    assert claim_next(ws.sessions, owner="other") is None  # lease still valid
    _expire(ws, job_id)
    taken = claim_next(ws.sessions, owner="other", lease_s=30)
    assert taken is not None and taken.id == job_id and taken.attempts == 2
    assert heartbeat(ws.sessions, job_id=job_id, owner="dead") is False
    assert complete(ws.sessions, job_id=job_id, owner="dead") is False
    assert (
        heartbeat(ws.sessions, job_id=job_id, owner="other", progress=0.25, message="a quarter")
        is True
    )
    row = _job(ws, job_id)
    assert (row.status, row.lease_owner, row.progress, row.message) == (
        "running",
        "other",
        0.25,
        "a quarter",
    )


def test_requeue_expired_puts_running_jobs_back(ws: Workspace) -> None:
    job_id = _add(ws)
    live_id = _add(ws)
    claim_next(ws.sessions, owner="dead")
    claim_next(ws.sessions, owner="alive", lease_s=300)
    _expire(ws, job_id)
    assert requeue_expired(ws.sessions) == 1
    row = _job(ws, job_id)
    assert (row.status, row.lease_owner, row.attempts) == ("queued", None, 1)
    assert "re-queued" in (row.message or "")
    assert _job(ws, live_id).status == "running"


def test_job_that_keeps_killing_its_worker_fails_after_max_attempts(ws: Workspace) -> None:
    job_id = _add(ws)
    for attempt in range(1, 4):
        claimed = claim_next(ws.sessions, owner=f"w{attempt}", max_attempts=3)
        assert claimed is not None and claimed.attempts == attempt
        _expire(ws, job_id)
    assert claim_next(ws.sessions, owner="w4", max_attempts=3) is None
    row = _job(ws, job_id)
    assert row.status == "failed"
    assert "stopped 3 times" in (row.error or "")


def test_complete_fail_and_release(ws: Workspace) -> None:
    done_id, failed_id, released_id = _add(ws), _add(ws), _add(ws)
    for _ in range(3):
        claim_next(ws.sessions, owner="w")
    assert complete(ws.sessions, job_id=done_id, owner="w", message="ok", result={"indexed": 3})
    assert fail(ws.sessions, job_id=failed_id, owner="w", error="corpus 'x' does not exist")
    assert release(ws.sessions, job_id=released_id, owner="w")
    done, failed, released = _job(ws, done_id), _job(ws, failed_id), _job(ws, released_id)
    assert (done.status, done.progress, done.params["result"]) == ("done", 1.0, {"indexed": 3})
    assert done.finished_at is not None and done.lease_owner is None
    assert (failed.status, failed.error) == ("failed", "corpus 'x' does not exist")
    assert (released.status, released.attempts, released.lease_owner) == ("queued", 0, None)


def test_get_job_unknown_raises_not_found(ws: Workspace) -> None:
    with ws.sessions() as s, pytest.raises(NotFoundError, match="job 42 does not exist"):
        get_job(s, job_id=42)


def _claim_all(
    ws_url: str, owner: str, claims: list[tuple[str, int]], barrier: threading.Barrier
) -> None:
    engine = make_engine(ws_url) if ws_url.startswith("sqlite") else create_engine(ws_url)
    sessions = make_session_factory(engine)
    barrier.wait()
    try:
        while (job := claim_next(sessions, owner=owner, lease_s=300)) is not None:
            claims.append((owner, job.id))
    finally:
        engine.dispose()


def _race(url: str, workers: int) -> list[tuple[str, int]]:
    claims: list[tuple[str, int]] = []
    barrier = threading.Barrier(workers)
    threads = [
        threading.Thread(target=_claim_all, args=(url, f"w{i}", claims, barrier))
        for i in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return claims


def test_concurrent_workers_on_sqlite_never_claim_one_job_twice(ws: Workspace) -> None:
    ids = [_add(ws) for _ in range(40)]
    claims = _race(ws.database_url, workers=4)
    counts = Counter(job_id for _owner, job_id in claims)
    assert sorted(counts) == ids
    assert set(counts.values()) == {1}


@pytest.mark.postgres
def test_concurrent_workers_on_postgres_skip_locked_rows(pg_url: str) -> None:
    engine = create_engine(pg_url)
    Base.metadata.create_all(engine)
    sessions = make_session_factory(engine)
    try:
        with transaction(sessions) as s:
            ids = [enqueue(s, kind="audit").id for _ in range(60)]
        claims = _race(pg_url, workers=6)
        counts = Counter(job_id for _owner, job_id in claims)
        assert sorted(counts) == ids
        assert set(counts.values()) == {1}
        assert len({owner for owner, _ in claims}) > 1
    finally:
        engine.dispose()
