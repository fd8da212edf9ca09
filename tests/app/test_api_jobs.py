"""Jobs: status of background work, and the in-process worker running queued jobs."""

from __future__ import annotations

import time
from pathlib import Path

from apptest_support import api_client, assert_error, new_home, seed_audit, workspace

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.jobs.queue import enqueue


def test_job_detail_and_list(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files", status="running")
    with api_client(home) as client:
        job = client.get(f"/api/v1/jobs/{seeded.job}").json()
        listing = client.get("/api/v1/jobs", params={"status": "running"}).json()
        none = client.get("/api/v1/jobs", params={"status": "failed"}).json()
        assert_error(client.get("/api/v1/jobs/999"), 404, "not_found", contains="job 999")
        assert_error(client.get("/api/v1/jobs", params={"status": "paused"}), 400, "bad_request")
    assert job["kind"] == "audit" and job["status"] == "running" and job["audit_id"] == seeded.audit
    assert listing["total"] == 1 and listing["items"][0]["id"] == seeded.job
    assert none == {"items": [], "total": 0, "page": 1, "page_size": 50}


def test_in_process_worker_fails_a_broken_index_job_with_its_reason(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    ws = workspace(home)
    try:
        with transaction(ws.sessions) as s:
            job_id = enqueue(
                s,
                kind="index",
                params={"corpus": "web", "sources": [str(tmp_path / "missing")], "no_embed": True},
            ).id
    finally:
        ws.close()
    with api_client(home, run_worker=True, job_poll_s=0.05) as client:
        deadline = time.monotonic() + 60
        job = client.get(f"/api/v1/jobs/{job_id}").json()
        while job["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.1)
            job = client.get(f"/api/v1/jobs/{job_id}").json()
    assert job["status"] == "failed"
    assert "does not exist" in job["error"] and job["attempts"] == 1
