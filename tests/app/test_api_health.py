"""``GET /health`` and the OpenAPI document."""

from __future__ import annotations

from pathlib import Path

from apptest_support import api_client, new_home

from splitaudit.indexer import __version__


def test_health_reports_database_and_worker(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    with api_client(home) as client:
        off = client.get("/api/v1/health").json()
    with api_client(home, run_worker=True, job_poll_s=0.05) as client:
        on = client.get("/api/v1/health").json()
    assert off == {"status": "ok", "version": __version__, "database": "ok", "worker": "off"}
    assert on["worker"] == "running"


def test_openapi_lists_every_endpoint(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        spec = client.get("/openapi.json").json()
        docs = client.get("/docs")
    paths = set(spec["paths"])
    assert {
        "/api/v1/health",
        "/api/v1/corpora",
        "/api/v1/corpora/{name}",
        "/api/v1/corpora/{name}/sources",
        "/api/v1/audits",
        "/api/v1/audits/{audit_id}",
        "/api/v1/audits/{audit_id}/report",
        "/api/v1/audits/{audit_id}/matches",
        "/api/v1/matches/{match_id}",
        "/api/v1/matches/{match_id}/review",
        "/api/v1/items/{item_id}/thumbnail",
        "/api/v1/split-items/{item_id}/thumbnail",
        "/api/v1/jobs/{job_id}",
    } <= paths
    submit = spec["paths"]["/api/v1/audits"]["post"]["requestBody"]["content"]
    assert set(submit) == {"multipart/form-data", "application/json"}
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
