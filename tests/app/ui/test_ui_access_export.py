"""UI access with API tokens, and the review exports (CSV, JSON, gate baseline)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ui_support import new_home, parse, seed, ui_client

from splitaudit.indexer.gate.baseline import parse_baseline

TOKENS = "alice:s3cret-alice-0123456"


def test_public_read_keeps_pages_open_and_offers_a_token_dialog_for_writes(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    with ui_client(home, api_tokens=TOKENS, public_read=True) as client:
        page = client.get(f"/ui/audits/{s.audit}/review/1")
        anonymous_put = client.put(
            f"/api/v1/matches/{s.matches['near']}/review", json={"verdict": "duplicate"}
        )
        put = client.put(
            f"/api/v1/matches/{s.matches['near']}/review",
            json={"verdict": "duplicate"},
            headers={"Authorization": "Bearer s3cret-alice-0123456"},
        )
        pair = parse(client.get(f"/ui/matches/{s.matches['near']}").text)
    assert page.status_code == 200
    doc = parse(page.text)
    assert (
        doc.one("body").attrs["data-auth"] == "on"
        and doc.one("body").attrs["data-read-auth"] == "off"
    )
    assert doc.by_id("token-dialog").one("input", type="password")
    assert doc.find_all("img", class_="thumb")[0].attrs.get("src")
    assert anonymous_put.status_code == 401 and put.status_code == 200
    assert "alice" in pair.by_id("current-verdict").text


def test_tokens_for_reads_turn_pages_into_a_token_prompt(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    with ui_client(home, api_tokens=TOKENS) as client:
        prompt = client.get(f"/ui/audits/{s.audit}")
        wrong = client.get(f"/ui/audits/{s.audit}", headers={"Authorization": "Bearer nope"})
        page = client.get(
            f"/ui/audits/{s.audit}/review/1",
            headers={"Authorization": "Bearer s3cret-alice-0123456"},
        )
        export = client.get(f"/ui/audits/{s.audit}/export.csv")
        static = client.get("/ui/static/app.js")
    assert prompt.status_code == 401 and prompt.headers["content-type"].startswith("text/html")
    doc = parse(prompt.text)
    assert doc.one("body").attrs["data-page"] == "auth-required"
    assert doc.find_all("button", data_token_open=True) and "pets-test" not in prompt.text
    assert wrong.status_code == 401 and "invalid API token" in wrong.text
    assert page.status_code == 200
    imgs = parse(page.text).find_all("img", class_="thumb")
    assert imgs and all(
        "src" not in i.attrs and i.attrs["data-auth-src"].startswith("/api/v1/") for i in imgs
    )
    assert export.status_code == 401
    assert static.status_code == 200


def test_review_exports_list_every_pair_with_its_current_verdict(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    with ui_client(home) as client:
        client.put(
            f"/api/v1/matches/{s.matches['semantic']}/review",
            json={"verdict": "not_duplicate", "note": "=another dog"},
        )
        as_csv = client.get(f"/ui/audits/{s.audit}/export.csv")
        as_json = client.get(f"/ui/audits/{s.audit}/export.json")
        baseline = client.get(f"/ui/audits/{s.audit}/export.baseline.json")
        unknown = client.get(f"/ui/audits/{s.audit}/export.xml")
        missing = client.get("/ui/audits/999/export.csv")
    assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith("text/csv")
    assert "attachment" in as_csv.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert len(rows) == s.pair_total
    by_id = {int(r["match_id"]): r for r in rows}
    assert (by_id[s.matches["exact"]]["verdict"], by_id[s.matches["exact"]]["reviewer"]) == (
        "duplicate",
        "bob",
    )
    assert by_id[s.matches["semantic"]]["note"] == "'=another dog"  # no formula in a spreadsheet
    assert by_id[s.matches["near"]]["verdict"] == ""
    doc = as_json.json()
    assert doc["counts"] == {"duplicate": 1, "not_duplicate": 1, "unreviewed": s.pair_total - 2}
    entries = parse_baseline(baseline.json(), source="export").entries
    assert [(e.test_key, e.corpus_key, e.kind, e.note) for e in entries] == [
        ("dog/1.jpg", "000003.jpg", "semantic", "=another dog")
    ]
    assert unknown.status_code == 404 and missing.status_code == 404
