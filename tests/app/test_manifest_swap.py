"""Run-time roots: a manifest rewritten after acceptance cannot make the job read or serve outside the roots."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from apptest_support import api_client, assert_error, new_home, workspace
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.db.models import Job, SplitItem
from splitaudit.indexer.jobs.worker import Worker
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.runtime.handlers import default_handlers
from splitaudit.indexer.sources.folder import FolderSource


def _rows(*paths: str) -> str:
    return "".join(json.dumps({"path": p}) + "\n" for p in paths)


def _run_queued_jobs(home: Path) -> None:
    """Start a worker, wait until no job is queued or running, stop it."""
    ws = workspace(home)
    worker = Worker(ws, default_handlers(), lease_s=60, poll_s=0.05)
    worker.start()
    try:
        deadline = time.monotonic() + 120
        while True:
            with ws.sessions() as s:
                busy = s.scalar(select(Job.id).where(Job.status.in_(("queued", "running"))))
            if busy is None:
                break
            assert time.monotonic() < deadline, "the audit job did not finish"
            time.sleep(0.1)
    finally:
        worker.stop(30)
        ws.close()


def test_rewritten_manifest_rows_outside_the_roots_become_failed_items(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    roots, outside, corpus = tmp_path / "roots", tmp_path / "outside", tmp_path / "corpus"
    for folder in (roots, outside, corpus):
        folder.mkdir()
    photo(1, (96, 64)).save(corpus / "c1.png")
    photo(1, (96, 64)).save(outside / "secret.png")  # would be an exact match if it were read
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    photo(2, (96, 64)).save(roots / "a.png")
    os.symlink(outside / "secret.png", roots / "link.png")
    ws = workspace(home)
    try:
        index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    finally:
        ws.close()
    manifest = roots / "split.jsonl"
    manifest.write_text(_rows(str(roots / "a.png")))

    with api_client(home, source_roots=[roots]) as client:  # worker stopped: the job stays queued
        accepted = client.post("/api/v1/audits", json={"manifest": str(manifest), "corpus": ["c"]})
        assert accepted.status_code == 202, accepted.text
        audit_id = accepted.json()["id"]
        manifest.write_text(
            _rows(
                str(roots / "a.png"),
                str(outside / "secret.png"),
                str(outside / "passwd"),
                str(roots / "link.png"),
                "../outside/secret.png",
            )
            + json.dumps({"url": "http://127.0.0.1:9/x.png", "key": "remote"})
            + "\n"
        )
        _run_queued_jobs(home)

        status = client.get(f"/api/v1/audits/{audit_id}").json()
        assert status["status"] == "done", status
        report = client.get(f"/api/v1/audits/{audit_id}/report").json()
        assert [i["key"] for i in report["items"]] == [str(roots / "a.png")]
        assert all(i["matches"] == [] for i in report["items"])  # secret.png was never read
        failed = {f["key"]: f["reason"] for f in report["failed"]}
        assert set(failed) == {
            str(outside / "secret.png"),
            str(outside / "passwd"),
            str(roots / "link.png"),
            "../outside/secret.png",
            "remote",
        }
        assert all(reason.startswith("path not allowed") for reason in failed.values()), failed
        assert "root:x" not in json.dumps(report)

        ws = workspace(home)
        try:
            with ws.sessions() as s:
                items = {i.key: i for i in s.scalars(select(SplitItem))}
        finally:
            ws.close()
        assert all(items[k].sha256 is None and items[k].width is None for k in failed)
        for key in (str(outside / "secret.png"), str(roots / "link.png")):
            assert_error(
                client.get(f"/api/v1/split-items/{items[key].id}/thumbnail"),
                403,
                "path_not_allowed",
            )
        good = items[str(roots / "a.png")]
        assert client.get(f"/api/v1/split-items/{good.id}/thumbnail").status_code == 200
        # the audited file swapped for a symlink out of the roots afterwards: not served either
        (roots / "a.png").unlink()
        os.symlink(outside / "secret.png", roots / "a.png")
        assert_error(
            client.get(f"/api/v1/split-items/{good.id}/thumbnail"), 403, "path_not_allowed"
        )


def test_manifest_replaced_by_a_symlink_out_of_the_roots_fails_the_job_cleanly(
    tmp_path: Path,
) -> None:
    home = new_home(tmp_path)
    roots, outside, corpus = tmp_path / "roots", tmp_path / "outside", tmp_path / "corpus"
    for folder in (roots, outside, corpus):
        folder.mkdir()
    photo(1, (96, 64)).save(corpus / "c1.png")
    photo(2, (96, 64)).save(roots / "a.png")
    ws = workspace(home)
    try:
        index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    finally:
        ws.close()
    manifest = roots / "split.jsonl"
    manifest.write_text(_rows(str(roots / "a.png")))
    (outside / "split.jsonl").write_text(_rows(str(roots / "a.png")))
    with api_client(home, source_roots=[roots]) as client:
        audit_id = client.post(
            "/api/v1/audits", json={"manifest": str(manifest), "corpus": ["c"]}
        ).json()["id"]
        manifest.unlink()
        os.symlink(outside / "split.jsonl", manifest)
        _run_queued_jobs(home)
        status = client.get(f"/api/v1/audits/{audit_id}").json()
    assert status["status"] == "failed"
    assert "path not allowed" in status["error"] and "outside the allowed roots" in status["error"]
