"""The worker: runs handlers, records progress / outcome, stops cleanly, notices a lost lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update

from splitaudit.indexer.db.engine import make_engine, make_session_factory, transaction
from splitaudit.indexer.db.models import Base, Job
from splitaudit.indexer.errors import InputError
from splitaudit.indexer.jobs.queue import ClaimedJob, enqueue, get_job
from splitaudit.indexer.jobs.worker import JobOutcome, ProgressFn, Worker
from splitaudit.indexer.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    workspace = Workspace(
        home=tmp_path, database_url=url, engine=engine, sessions=make_session_factory(engine)
    )
    yield workspace
    workspace.close()


def _add(ws: Workspace, kind: str = "audit") -> int:
    with transaction(ws.sessions) as s:
        return enqueue(s, kind=kind, params={"x": 1}).id


def _job(ws: Workspace, job_id: int) -> Job:
    with ws.sessions() as s:
        return get_job(s, job_id=job_id)


def test_run_once_records_progress_and_result(ws: Workspace) -> None:
    job_id = _add(ws)
    seen: dict[str, object] = {}

    def handler(w: Workspace, job: ClaimedJob, progress: ProgressFn) -> JobOutcome:
        progress(0.5, "half way")
        row = _job(w, job.id)
        seen.update(
            status=row.status, progress=row.progress, message=row.message, params=job.params
        )
        return JobOutcome(message="all good", result={"n": 7})

    worker = Worker(ws, {"audit": handler}, owner="t", progress_interval_s=0.0)
    assert worker.run_once() is True
    assert seen == {"status": "running", "progress": 0.5, "message": "half way", "params": {"x": 1}}
    row = _job(ws, job_id)
    assert (row.status, row.progress, row.message, row.params["result"]) == (
        "done",
        1.0,
        "all good",
        {"n": 7},
    )
    assert worker.run_once() is False


def test_library_error_fails_job_with_its_message(ws: Workspace) -> None:
    job_id = _add(ws)

    def handler(_w: Workspace, _job: ClaimedJob, _p: ProgressFn) -> None:
        raise InputError("split archive is empty; upload one with images")

    Worker(ws, {"audit": handler}).run_once()
    row = _job(ws, job_id)
    assert (row.status, row.error) == ("failed", "split archive is empty; upload one with images")
    assert row.finished_at is not None


def test_unexpected_exception_fails_job_as_internal_error(ws: Workspace) -> None:
    job_id = _add(ws)

    def handler(_w: Workspace, _job: ClaimedJob, _p: ProgressFn) -> None:
        raise ZeroDivisionError("boom")

    Worker(ws, {"audit": handler}).run_once()
    row = _job(ws, job_id)
    assert row.status == "failed"
    assert row.error == "internal error: ZeroDivisionError: boom"


def test_stop_requeues_the_running_job_without_counting_the_attempt(ws: Workspace) -> None:
    job_id = _add(ws)
    worker: Worker

    def handler(_w: Workspace, _job: ClaimedJob, progress: ProgressFn) -> None:
        worker.request_stop()  # as a shutdown would, while the job runs
        progress(0.3, "still going")
        raise AssertionError("progress should have raised JobCancelled")

    worker = Worker(ws, {"audit": handler})
    worker.run_once()
    row = _job(ws, job_id)
    assert (row.status, row.attempts, row.lease_owner) == ("queued", 0, None)


def test_lost_lease_stops_the_job_and_leaves_the_new_owner_alone(ws: Workspace) -> None:
    job_id = _add(ws)

    def handler(w: Workspace, job: ClaimedJob, progress: ProgressFn) -> None:
        with transaction(w.sessions) as s:  # another worker took the job over
            s.execute(update(Job).where(Job.id == job.id).values(lease_owner="thief"))
        progress(0.9, "almost")
        raise AssertionError("progress should have raised JobCancelled")

    Worker(ws, {"audit": handler}, owner="me", progress_interval_s=0.0).run_once()
    row = _job(ws, job_id)
    assert (row.status, row.lease_owner) == ("running", "thief")


def test_only_kinds_with_a_handler_are_claimed(ws: Workspace) -> None:
    job_id = _add(ws, kind="index")
    worker = Worker(ws, {"audit": lambda *_a: None})
    assert worker.run_once() is False
    assert _job(ws, job_id).status == "queued"


def test_thread_runs_queued_jobs_and_stops(ws: Workspace) -> None:
    done = threading.Event()

    def handler(_w: Workspace, _job: ClaimedJob, _p: ProgressFn) -> None:
        done.set()

    worker = Worker(ws, {"audit": handler}, poll_s=0.05)
    worker.start()
    try:
        assert worker.is_running
        job_id = _add(ws)
        assert done.wait(30)
        deadline = time.monotonic() + 30
        while _job(ws, job_id).status != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _job(ws, job_id).status == "done"
    finally:
        worker.stop(10)
    assert not worker.is_running


def test_heartbeat_renews_the_lease_while_a_job_runs(ws: Workspace) -> None:
    job_id = _add(ws)
    leases: list[object] = []

    def handler(w: Workspace, job: ClaimedJob, _p: ProgressFn) -> None:
        leases.append(_job(w, job.id).lease_expires_at)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            current = _job(w, job.id).lease_expires_at
            if current != leases[0]:
                leases.append(current)
                return
            time.sleep(0.05)

    Worker(ws, {"audit": handler}, lease_s=0.3).run_once()
    assert len(leases) == 2 and leases[1] > leases[0]  # type: ignore[operator]
    assert _job(ws, job_id).status == "done"
