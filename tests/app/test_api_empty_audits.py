"""Over REST too, an audit against a corpus that was never indexed fails with the reason,
unless the upload says ``allow_empty=true``."""

from __future__ import annotations

from pathlib import Path

from apptest_support import api_client, assert_error, new_home, png_bytes, workspace, zip_bytes

from splitaudit.indexer.jobs.worker import Worker
from splitaudit.indexer.runtime.handlers import default_handlers


def test_an_audit_against_a_never_indexed_corpus_fails_unless_allowed(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    archive = zip_bytes({"t.png": png_bytes(1)})
    with api_client(home) as client:
        client.post("/api/v1/corpora", json={"name": "web"})  # created, never indexed
        ids = []
        for extra in ({}, {"allow_empty": "true"}):
            accepted = client.post(
                "/api/v1/audits",
                files={"split": ("s.zip", archive, "application/zip")},
                data={"corpus": "web", **extra},
            )
            assert accepted.status_code == 202, accepted.text
            ids.append(accepted.json()["id"])
        bad = client.post(
            "/api/v1/audits",
            files={"split": ("s.zip", archive, "application/zip")},
            data={"corpus": "web", "allow_empty": "perhaps"},
        )
        assert_error(bad, 400, "bad_request", contains="allow_empty")
        ws = workspace(home)
        try:
            worker = Worker(ws, default_handlers(), poll_s=0.01)
            assert worker.run_once() and worker.run_once()
        finally:
            ws.close()
        refused, allowed = (client.get(f"/api/v1/audits/{i}").json() for i in ids)
    assert refused["status"] == "failed"
    assert "'web' has no indexed images" in refused["error"]
    assert "allow_empty=true" in refused["error"]
    assert allowed["status"] == "done"
