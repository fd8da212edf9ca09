"""Job handlers: server-side index runs (restricted to the allowed roots) and the audit lookup."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Audit, FailedItem, Item, Job, Split
from splitaudit.indexer.errors import InputError, NotFoundError
from splitaudit.indexer.jobs.queue import ClaimedJob
from splitaudit.indexer.runtime.handlers import audit_id_of, run_index_job
from splitaudit.indexer.workspace import Workspace


@pytest.fixture
def ws(home: Path) -> Iterator[Workspace]:
    workspace = Workspace.open(home)
    yield workspace
    workspace.close()


def _progress(_fraction: float, _message: str) -> None:
    return None


def test_index_job_reads_only_files_under_the_allowed_roots(ws: Workspace, tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    photo(1, (64, 48)).save(root / "inside.jpg")
    secret = tmp_path / "secret.jpg"
    photo(2, (64, 48)).save(secret)
    manifest = root / "corpus.jsonl"
    manifest.write_text(
        json.dumps({"path": "inside.jpg"}) + "\n" + json.dumps({"path": str(secret)}) + "\n"
    )
    job = ClaimedJob(
        id=1,
        kind="index",
        owner="t",
        attempts=1,
        params={
            "corpus": "web",
            "sources": [str(manifest)],
            "no_embed": True,
            "allowed_roots": [str(root)],
        },
    )
    outcome = run_index_job(ws, job, _progress)
    assert outcome.result is not None
    assert (outcome.result["indexed"], outcome.result["failed"]) == (1, 1)
    with ws.sessions() as s:
        assert s.scalars(select(Item.key)).all() == ["inside.jpg"]
        reason = s.scalars(select(FailedItem.reason)).one()
    assert "path not allowed" in reason
    assert outcome.message == "indexed 1, already present 0, failed 1"


def test_index_job_without_sources_is_an_input_error(ws: Workspace) -> None:
    job = ClaimedJob(
        id=1, kind="index", owner="t", attempts=1, params={"corpus": "web", "sources": []}
    )
    with pytest.raises(InputError, match="names no corpus or no sources"):
        run_index_job(ws, job, _progress)


def test_audit_id_from_params_or_from_the_audit_row(ws: Workspace) -> None:
    with transaction(ws.sessions) as s:
        split = Split(name="t")
        job = Job(kind="audit")
        s.add_all([split, job])
        s.flush()
        audit = Audit(split_id=split.id, job_id=job.id, corpora=[])
        s.add(audit)
        s.flush()
        ids = (job.id, audit.id)
    assert (
        audit_id_of(ws, ClaimedJob(id=ids[0], kind="audit", owner="t", attempts=1, params={}))
        == ids[1]
    )
    assert (
        audit_id_of(
            ws, ClaimedJob(id=999, kind="audit", owner="t", attempts=1, params={"audit_id": 7})
        )
        == 7
    )
    with pytest.raises(NotFoundError, match="job 999 has no audit"):
        audit_id_of(ws, ClaimedJob(id=999, kind="audit", owner="t", attempts=1, params={}))
