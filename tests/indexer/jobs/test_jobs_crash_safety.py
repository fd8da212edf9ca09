"""Crash safety of audit jobs: a killed audit resumes, a local audit is its process's alone,
a job run twice stores its results once, errors stay short, and an empty audit never passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from splitaudit.indexer.audit.ingest import ingest_split
from splitaudit.indexer.audit.service import execute_audit, run_audit, submit_audit
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Audit, Corpus, Job, Match, Split, SplitItem
from splitaudit.indexer.errors import EmptyAuditError, InputError
from splitaudit.indexer.jobs.queue import (
    claim_next,
    fail_orphaned_local,
    job_error_text,
    requeue_expired,
)
from splitaudit.indexer.jobs.worker import Worker
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.runtime.handlers import default_handlers
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def _home(tmp_path: Path) -> Workspace:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        photo(i, (96, 64)).save(corpus / f"c{i}.png")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    return ws


def _split(tmp_path: Path, n: int = 4) -> Path:
    root = tmp_path / "split"
    root.mkdir()
    for i in range(n):  # t0 and t1 are copies of corpus images: two exact matches
        photo(i if i < 2 else 50 + i, (96, 64)).save(root / f"t{i}.png")
    return root


def _count(ws: Workspace, model: type, *where: object) -> int:
    with ws.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)  # type: ignore[arg-type]


def test_an_audit_killed_while_reading_the_split_resumes_without_duplicates(
    tmp_path: Path,
) -> None:
    ws = _home(tmp_path)
    root = _split(tmp_path)
    audit_id = submit_audit(ws, split_uri=str(root), name="s", corpora=["c"], local=False)
    with ws.sessions() as s:
        split_id = s.get_one(Audit, audit_id).split_id
    # What a kill after the first committed batch leaves: some rows, split not marked ingested.
    ingest_split(ws, split_id, FolderSource(root), embedders={})
    with transaction(ws.sessions) as s:
        s.execute(update(Split).values(ingested=False))
        s.execute(
            SplitItem.__table__.delete().where(SplitItem.key.in_(["t2.png", "t3.png"]))  # type: ignore[attr-defined]
        )
    assert _count(ws, SplitItem) == 2

    # The worker's retry: no IntegrityError, every item once, the matches found.
    worker = Worker(ws, default_handlers(), poll_s=0.01)
    assert worker.run_once()
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
        keys = sorted(s.scalars(select(SplitItem.key)).all())
    assert (job.status, job.error) == ("done", None)
    assert keys == ["t0.png", "t1.png", "t2.png", "t3.png"]
    assert _count(ws, Match, Match.kind == "exact") == 2


def test_a_job_run_twice_stores_its_results_once(tmp_path: Path) -> None:
    ws = _home(tmp_path)
    audit_id = submit_audit(ws, split_uri=str(_split(tmp_path)), name="s", corpora=["c"])
    run_audit(ws, audit_id)
    first = _count(ws, Match, Match.audit_id == audit_id)
    execute_audit(ws, audit_id)  # a second worker or a retry after a lost lease
    assert first == 2 and _count(ws, Match, Match.audit_id == audit_id) == first
    assert _count(ws, SplitItem) == 4


def test_a_local_audit_is_never_claimed_by_a_worker(tmp_path: Path) -> None:
    ws = _home(tmp_path)
    audit_id = submit_audit(ws, split_uri=str(_split(tmp_path)), name="s", corpora=["c"])
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
    assert job.status == "running" and job.lease_owner and job.lease_owner.startswith("local:")
    # A server on the same home finds nothing to claim, now or after any lease time.
    assert claim_next(ws.sessions, owner="server", lease_s=0.001) is None
    assert requeue_expired(ws.sessions) == 0
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
    assert (job.status, job.lease_owner, job.attempts) == ("done", None, 1)


def test_a_local_job_whose_process_died_is_failed_not_left_running(tmp_path: Path) -> None:
    ws = _home(tmp_path)
    submit_audit(ws, split_uri=str(_split(tmp_path)), name="s", corpora=["c"])
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    import socket

    with transaction(ws.sessions) as s:
        s.execute(
            update(Job).values(lease_owner=f"local:{socket.gethostname()}:{dead.stdout.strip()}")
        )
    assert fail_orphaned_local(ws.sessions) == 1
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
    assert job.status == "failed" and "run the command again" in (job.error or "")


def test_a_job_error_never_carries_sql_or_object_reprs() -> None:
    sql = "INSERT INTO split_item (split_id, key) VALUES (?, ?)" + " x" * 5000
    err = IntegrityError(sql, {"a": 1}, Exception("UNIQUE constraint failed"))
    text = job_error_text(err)
    assert "INSERT" not in text and "IntegrityError" in text and len(text) < 300
    text = job_error_text(ValueError("cannot read <_io.BytesIO object at 0x7f00>"))
    assert "0x7f00" not in text and text.startswith("internal error: ValueError")
    assert job_error_text(InputError("fix the path")) == "fix the path"


def test_a_crashing_worker_job_keeps_a_short_error(tmp_path: Path) -> None:
    ws = _home(tmp_path)
    with transaction(ws.sessions) as s:
        s.add(Job(kind="boom", status="queued", params={}, attempts=0))

    def boom(*_args: object) -> None:
        raise IntegrityError("INSERT INTO item " + "(a, b) " * 3000, {}, Exception("UNIQUE"))

    assert Worker(ws, {"boom": boom}, poll_s=0.01).run_once()
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
    assert job.status == "failed" and "INSERT" not in (job.error or "")
    assert len(job.error or "") < 300


def test_an_empty_split_fails_the_audit_unless_allowed(tmp_path: Path) -> None:
    ws = _home(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not an image")  # not a file an audit reads
    audit_id = submit_audit(ws, split_uri=str(empty), name="s", corpora=["c"])
    with pytest.raises(EmptyAuditError, match="--allow-empty"):
        run_audit(ws, audit_id)
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
    assert job.status == "failed" and "has no images" in (job.error or "")

    allowed = submit_audit(
        ws, split_uri=str(empty), name="s", corpora=["c"], params={"allow_empty": True}
    )
    run_audit(ws, allowed)
    with ws.sessions() as s:
        assert s.get_one(Audit, allowed).summary["items"] == 0


def test_an_empty_corpus_fails_the_audit_with_the_right_reason(tmp_path: Path) -> None:
    ws = _home(tmp_path)
    with transaction(ws.sessions) as s:
        s.add(Corpus(name="never"))
    audit_id = submit_audit(ws, split_uri=str(_split(tmp_path)), name="s", corpora=["never"])
    with pytest.raises(EmptyAuditError, match="'never' has no indexed images"):
        run_audit(ws, audit_id)
    allowed = submit_audit(
        ws,
        split_uri=str(tmp_path / "split"),
        name="s2",
        corpora=["never"],
        params={"allow_empty": True},
    )
    run_audit(ws, allowed)
    with ws.sessions() as s:
        model = s.get_one(Audit, allowed).model
    assert model["corpora"]["never"]["reason"] == "corpus has no indexed images"


def test_the_cli_gate_refuses_an_empty_split_unless_allow_empty(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from splitaudit.indexer.cli.main import cli

    _home(tmp_path).close()
    (tmp_path / "empty").mkdir()
    (tmp_path / ".git").mkdir()  # no policy file above
    args = ["audit", str(tmp_path / "empty"), "--corpus", "c", "--home", str(tmp_path / "home")]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2, refused.output
    assert "has no images" in refused.output and "Gate PASSED" not in refused.output
    allowed = CliRunner().invoke(cli, [*args, "--allow-empty"])
    assert allowed.exit_code == 0, allowed.output


def test_rows_a_concurrent_run_stored_first_are_taken_not_inserted_twice(tmp_path: Path) -> None:
    from splitaudit.indexer.audit.ingest import _store_batch
    from splitaudit.indexer.pipeline.extract import extract_record

    ws = _home(tmp_path)
    root = _split(tmp_path)
    audit_id = submit_audit(ws, split_uri=str(root), name="s", corpora=["c"])
    with ws.sessions() as s:
        split_id = s.get_one(Audit, audit_id).split_id
    ingest_split(ws, split_id, FolderSource(root), embedders={})  # the other run, first
    with ws.sessions() as s:
        stored = dict(s.execute(select(SplitItem.key, SplitItem.id)).all())
    source = FolderSource(root)
    batch = [
        extract_record(r, keep_image=False) for sh in source.shards() for r in source.records(sh)
    ]
    # This run started before those rows existed: its insert collides and takes theirs.
    ids = _store_batch(ws, split_id, batch, {}, {}, False)
    assert ids == [stored[e.record.key] for e in batch]
    assert _count(ws, SplitItem) == 4
