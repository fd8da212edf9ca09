"""Stopping a worker hands its job back at once, even when the job is stuck in a long call,
and a stopped dedup run says it is queued again (not running, not failed)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import DedupRun, Job
from splitaudit.indexer.jobs.queue import ClaimedJob, enqueue
from splitaudit.indexer.jobs.worker import JobCancelled, ProgressFn, Worker
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.runtime.handlers import run_dedup_job
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def _job(ws: Workspace) -> Job:
    with ws.sessions() as s:
        return s.scalars(select(Job)).one()


def test_stop_hands_back_a_job_stuck_in_a_long_call_promptly(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "home")
    with transaction(ws.sessions) as s:
        enqueue(s, kind="audit", params={})
    entered, release_call = threading.Event(), threading.Event()

    def handler(_w: Workspace, _job: ClaimedJob, _progress: ProgressFn) -> None:
        entered.set()
        release_call.wait(30)  # like FAISS reading a big index: no progress report

    worker = Worker(ws, {"audit": handler}, poll_s=0.01, lease_s=60)
    worker.start()
    try:
        assert entered.wait(10)
        started = time.monotonic()
        assert worker.stop(0.2) is False
        assert time.monotonic() - started < 5
        job = _job(ws)
        assert (job.status, job.attempts, job.lease_owner) == ("queued", 0, None)
    finally:
        release_call.set()
        worker.stop(10)
    # The abandoned call returning later cannot mark the job done.
    assert _job(ws).status == "queued"
    ws.close()


def test_a_stopped_dedup_job_leaves_its_run_queued_not_failed(tmp_path: Path) -> None:
    from splitaudit.indexer.dedup.service import create_dedup

    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(3):
        photo(i, (64, 48)).save(folder / f"{i}.png")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(folder)], embedder=None)
    run_id = create_dedup(ws, corpus="c", as_job=True)

    def progress(_f: float, _m: str) -> None:
        raise JobCancelled("stopping")

    job = ClaimedJob(id=1, kind="dedup", owner="me", attempts=1, params={"dedup_id": run_id})
    with pytest.raises(JobCancelled):
        run_dedup_job(ws, job, progress)
    with ws.sessions() as s:
        run = s.get_one(DedupRun, run_id)
    assert (run.status, run.error) == ("queued", None)
    ws.close()
