"""Audits: list, status, report in every format, and refusing a report before the audit is done."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from apptest_support import api_client, assert_error, new_home, seed_audit


def test_list_and_get(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        listing = client.get("/api/v1/audits").json()
        done = client.get("/api/v1/audits", params={"status": "done"}).json()
        queued = client.get("/api/v1/audits", params={"status": "queued"}).json()
        audit = client.get(f"/api/v1/audits/{seeded.audit}").json()
        assert_error(
            client.get("/api/v1/audits", params={"status": "sleeping"}), 400, "bad_request"
        )
        assert_error(
            client.get("/api/v1/audits/999"), 404, "not_found", contains="audit 999 does not exist"
        )
    assert listing["total"] == 1 and listing["items"][0]["id"] == seeded.audit
    assert done["total"] == 1 and queued["total"] == 0
    assert audit["status"] == "done" and audit["progress"] == 1.0
    assert audit["summary"] == {"items": 2, "flagged": 2}
    assert audit["corpora"] == ["laion"] and audit["split"]["name"] == "test"
    assert audit["links"]["report"] == f"/api/v1/audits/{seeded.audit}/report"


def test_report_in_every_format(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    base = f"/api/v1/audits/{seeded.audit}/report"
    with api_client(home) as client:
        as_json = client.get(base)
        as_csv = client.get(base, params={"format": "csv"})
        as_junit = client.get(base, params={"format": "junit"})
        as_md = client.get(base, params={"format": "md"})
        assert_error(
            client.get(base, params={"format": "pdf"}), 422, "invalid_request", contains="format"
        )
        assert_error(client.get("/api/v1/audits/999/report"), 404, "not_found")
    report = as_json.json()
    assert report["schema"] == "splitaudit.report/v1" and report["audit_id"] == seeded.audit
    kinds = {m["kind"] for item in report["items"] for m in item["matches"]}
    assert kinds == {"exact", "near", "semantic"}
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert as_csv.text.splitlines()[0].startswith("key,")
    assert "cat/1.png" in as_csv.text and "dog/1.png" in as_csv.text
    assert as_junit.headers["content-type"].startswith("application/xml")
    assert ET.fromstring(as_junit.content).tag in ("testsuites", "testsuite")
    assert as_md.headers["content-type"].startswith("text/markdown")
    assert "cat/1.png" in as_md.text
    assert 'filename="audit-' in as_csv.headers["content-disposition"]


def test_report_of_unfinished_or_failed_audit_is_a_conflict(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    running = seed_audit(home, tmp_path / "files", status="running")
    with api_client(home) as client:
        assert_error(
            client.get(f"/api/v1/audits/{running.audit}/report"),
            409,
            "conflict",
            contains="is running",
        )
