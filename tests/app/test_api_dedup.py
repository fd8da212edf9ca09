"""REST dedup (job, paged clusters, member review, drop list) and an audit's blocklist / clean split."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from apptest_support import api_client, assert_error, new_home, seed_audit, workspace
from helpers.planted_dedup import plant

from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource


def _wait(client: Any, run_id: int) -> dict[str, Any]:
    for _ in range(600):
        run = client.get(f"/api/v1/dedup/{run_id}").json()
        if run["status"] in ("done", "failed"):
            return run
        time.sleep(0.1)
    raise AssertionError(f"dedup {run_id} did not finish: {run}")


def test_dedup_job_clusters_review_and_drop_list(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    truth = plant(tmp_path / "corpus")
    ws = workspace(home)
    try:
        index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=None)
    finally:
        ws.close()
    with api_client(home, run_worker=True, job_poll_s=0.05) as client:
        assert_error(client.post("/api/v1/corpora/nope/dedup", json={}), 404, "not_found")
        assert_error(
            client.post("/api/v1/corpora/c/dedup", json={"keep": "prettiest"}),
            400,
            "bad_request",
            contains="largest",
        )
        accepted = client.post("/api/v1/corpora/c/dedup", json={"keep": "first"})
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["id"]
        assert accepted.headers["location"] == f"/api/v1/dedup/{run_id}"
        run = _wait(client, run_id)
        assert (
            run["status"] == "done" and run["summary"]["clusters"] == 4 and run["keep"] == "first"
        )
        job = client.get(f"/api/v1/jobs/{accepted.json()['job_id']}").json()
        assert job["status"] == "done" and job["kind"] == "dedup"
        first = client.get(f"/api/v1/dedup/{run_id}/clusters", params={"page_size": 3}).json()
        second = client.get(
            f"/api/v1/dedup/{run_id}/clusters", params={"page_size": 3, "page": 2}
        ).json()
        assert first["total"] == 4 and len(first["items"]) == 3 and len(second["items"]) == 1
        clusters = {
            frozenset(m["key"] for m in c["members"]) for c in first["items"] + second["items"]
        }
        assert clusters == {frozenset(v) for v in truth.values()}
        drop = client.get(f"/api/v1/dedup/{run_id}/drop-list").text.split()
        kept = {c["kept"] for c in first["items"] + second["items"]}
        assert set(drop) == {k for v in truth.values() for k in v} - kept
        assert client.get(
            f"/api/v1/dedup/{run_id}/drop-list", params={"format": "csv"}
        ).text.startswith("key,url")

        flip = next(
            m
            for c in first["items"] + second["items"]
            for m in c["members"]
            if m["key"] == "copy1_flip.jpg"
        )
        reviewed = client.put(
            f"/api/v1/dedup/{run_id}/members/{flip['item_id']}/review",
            json={"verdict": "not_duplicate", "note": "a different frame"},
        )
        assert reviewed.status_code == 200, reviewed.text
        assert reviewed.json()["pairs"] == 2
        assert_error(
            client.put(
                f"/api/v1/dedup/{run_id}/members/999999/review", json={"verdict": "duplicate"}
            ),
            404,
            "not_found",
        )
        again = _wait(client, client.post("/api/v1/corpora/c/dedup", json={}).json()["id"])
        assert again["summary"]["clusters"] == 4
        pages = client.get(f"/api/v1/dedup/{again['dedup_id']}/clusters").json()["items"]
        assert all(m["key"] != "copy1_flip.jpg" for c in pages for m in c["members"])
        assert_error(client.get("/api/v1/dedup/999"), 404, "not_found")


def test_audit_blocklist_and_clean_split_endpoints(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        block = client.get(f"/api/v1/audits/{seeded.audit}/blocklist")
        assert block.status_code == 200 and block.text.splitlines()[0] == "corpus,key,url,shard"
        assert {line.split(",")[1] for line in block.text.splitlines()[1:]} == {"k1.png", "k2"}
        everything = client.get(
            f"/api/v1/audits/{seeded.audit}/blocklist", params={"fail_on": "all", "format": "txt"}
        )
        assert set(everything.text.split()) == {"laion/k1.png", "laion/k2", "laion/k3"}
        clean = client.get(f"/api/v1/audits/{seeded.audit}/clean-split").text.split()
        assert clean == []
        only_exact = client.get(
            f"/api/v1/audits/{seeded.audit}/clean-split",
            params={"fail_on": "exact", "format": "csv"},
        ).text.splitlines()
        assert only_exact[0] == "key,path,label" and only_exact[1].startswith("dog/1.png")
        assert_error(
            client.get(f"/api/v1/audits/{seeded.audit}/blocklist", params={"fail_on": "bogus"}),
            400,
            "bad_request",
        )


def test_openapi_documents_dedup_and_decontamination_endpoints(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        paths = set(client.get("/openapi.json").json()["paths"])
    assert {
        "/api/v1/corpora/{name}/dedup",
        "/api/v1/dedup/{run_id}",
        "/api/v1/dedup/{run_id}/clusters",
        "/api/v1/dedup/{run_id}/drop-list",
        "/api/v1/dedup/{run_id}/members/{item_id}/review",
        "/api/v1/audits/{audit_id}/blocklist",
        "/api/v1/audits/{audit_id}/clean-split",
    } <= paths
