"""The published JSON Schema of the report: the committed file is the generated one, real reports validate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import photo

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.reporting.models import (
    SCHEMA,
    Report,
    report_json_schema,
    report_json_schema_text,
)

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "docs" / "schema" / "report-v1.json"


def test_committed_schema_file_is_the_generated_one() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == report_json_schema_text(), (
        "docs/schema/report-v1.json is stale: regenerate it with "
        "python -c 'from splitaudit.indexer.reporting.models import report_json_schema_text as t; "
        'open("docs/schema/report-v1.json", "w").write(t())\''
    )
    assert json.loads(SCHEMA_FILE.read_text())["properties"]["schema"]["const"] == SCHEMA


def test_a_real_gated_report_validates_and_round_trips(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    corpus, split = tmp_path / "corpus", tmp_path / "split"
    corpus.mkdir()
    split.mkdir()
    for seed in range(3):
        photo(seed).save(corpus / f"img{seed}.png")
    (split / "exact.png").write_bytes((corpus / "img0.png").read_bytes())
    photo(50).save(split / "clean.png")
    (split / "broken.jpg").write_bytes(b"not an image")
    home, out = tmp_path / "home", tmp_path / "r.json"
    run = CliRunner().invoke(
        cli, ["index", str(corpus), "--corpus", "c", "--home", str(home), "--no-embed"]
    )
    assert run.exit_code == 0, run.output
    run = CliRunner().invoke(
        cli,
        [
            "audit",
            str(split),
            "--corpus",
            "c",
            "--home",
            str(home),
            "--max-unreadable",
            "1",
            "--json",
            str(out),
        ],
    )
    assert run.exit_code == 1, run.output  # the exact copy fails the gate
    doc = json.loads(out.read_text())
    jsonschema.Draft202012Validator(report_json_schema()).validate(doc)
    assert doc["gate"]["flagged_keys"] == ["exact.png"] and doc["failed"][0]["key"] == "broken.jpg"
    # read back and written again: the same document, key for key
    assert Report.model_validate(doc).to_json() == doc
    bad = dict(doc, items=[{"key": "x.jpg", "matches": [{"kind": "not-a-tier"}]}])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, report_json_schema())
