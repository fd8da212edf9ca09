"""``POST /audits`` as JSON takes what the CLI takes: ``allow_empty``, and a Hugging Face
dataset's ``key_column`` / ``image_column`` (multipart uploads take them as form fields)."""

from __future__ import annotations

import json
from pathlib import Path

from apptest_support import api_client, assert_error, new_home, workspace
from conftest import photo
from helpers.hf_layout import HFRows, jpeg, write_parquet

import splitaudit
from splitaudit.indexer.db.models import Audit, Split
from splitaudit.indexer.jobs.worker import Worker
from splitaudit.indexer.runtime.handlers import default_handlers


def _dataset(folder: Path) -> Path:
    rows = HFRows(
        images=[jpeg(photo(i, (64, 48))) for i in range(3)],
        labels=[0, 1, 0],
        captions=["a red kite", "the old mill", "harbour at dusk"],
        names=["x", "y"],
    )
    write_parquet(folder / "data" / "test-00000-of-00001.parquet", rows)
    return folder


def _run_jobs(home: Path, count: int) -> None:
    ws = workspace(home)
    try:
        worker = Worker(ws, default_handlers(), poll_s=0.01)
        for _ in range(count):
            assert worker.run_once()
    finally:
        ws.close()


def test_json_key_column_keys_the_report_rows(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    root = tmp_path / "data"
    dataset = _dataset(root / "split")
    splitaudit.index(dataset, corpus="web", home=home, embed=False, progress=False)
    with api_client(home, source_roots=[root]) as client:
        accepted = client.post(
            "/api/v1/audits",
            json={"folder": str(dataset), "corpus": "web", "key_column": "caption"},
        )
        assert accepted.status_code == 202, accepted.text
        audit_id = accepted.json()["id"]
        ws = workspace(home)
        try:
            with ws.sessions() as s:
                split = s.get_one(Split, s.get_one(Audit, audit_id).split_id)
                assert split.source.endswith("#key_column=caption")
        finally:
            ws.close()
        _run_jobs(home, 1)
        report = client.get(f"/api/v1/audits/{audit_id}/report").json()
    keys = sorted(item["key"] for item in report["items"])
    assert keys == ["a red kite", "harbour at dusk", "the old mill"]
    assert all(m["kind"] == "exact" for item in report["items"] for m in item["matches"])


def test_key_column_on_a_plain_folder_or_an_unknown_column_is_refused(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    root = tmp_path / "data"
    plain = root / "plain"
    plain.mkdir(parents=True)
    photo(1, (64, 48)).save(plain / "a.png")
    dataset = _dataset(root / "split")
    with api_client(home, source_roots=[root]) as client:
        client.post("/api/v1/corpora", json={"name": "web"})
        refused = client.post(
            "/api/v1/audits", json={"folder": str(plain), "corpus": "web", "key_column": "id"}
        )
        assert_error(refused, 400, "bad_request", contains="Hugging Face datasets")
        unknown = client.post(
            "/api/v1/audits", json={"folder": str(dataset), "corpus": "web", "key_column": "nope"}
        )
        assert unknown.status_code == 422, unknown.text  # bad input: the column is not there
        assert "no column 'nope'" in json.dumps(unknown.json())


def test_json_allow_empty_lets_an_audit_that_checks_nothing_finish(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    root = tmp_path / "data"
    folder = root / "split"
    folder.mkdir(parents=True)
    photo(1, (64, 48)).save(folder / "a.png")
    with api_client(home, source_roots=[root]) as client:
        client.post("/api/v1/corpora", json={"name": "web"})  # created, never indexed
        ids = []
        for extra in ({}, {"allow_empty": True}):
            accepted = client.post(
                "/api/v1/audits", json={"folder": str(folder), "corpus": "web", **extra}
            )
            assert accepted.status_code == 202, accepted.text
            ids.append(accepted.json()["id"])
        bad = client.post(
            "/api/v1/audits",
            json={"folder": str(folder), "corpus": "web", "allow_empty": "perhaps"},
        )
        assert bad.status_code == 422, bad.text
        _run_jobs(home, 2)
        refused, allowed = (client.get(f"/api/v1/audits/{i}").json() for i in ids)
    assert refused["status"] == "failed"
    assert "'web' has no indexed images" in refused["error"]
    assert allowed["status"] == "done"
