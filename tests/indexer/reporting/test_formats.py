"""Report formats: JSON, CSV, JUnit XML (parsed back), Markdown; with and without a gate section."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.gate.evaluate import apply_gate, evaluate
from splitaudit.indexer.gate.policy import Policy
from splitaudit.indexer.reporting.formats import (
    CSV_COLUMNS,
    render,
    render_csv,
    render_junit,
    render_markdown,
)


def sample_report() -> dict[str, Any]:
    """Three readable items (near dup, reviewed-away exact + label leak, clean) and one unreadable."""
    leak_evidence = {
        "hits": [
            {
                "field": "caption",
                "term": "cat",
                "label": "cat",
                "start": 2,
                "end": 5,
                "before": "a ",
                "match": "cat",
                "after": " on a sofa",
                "context": "a [[cat]] on a sofa",
            }
        ],
        "hit_count": 1,
    }
    return {
        "schema": "splitaudit.report/v1",
        "audit_id": 3,
        "corpora": ["laion"],
        "created_at": "2024-05-01T10:00:00+00:00",
        "summary": {
            "items": 4,
            "readable": 3,
            "failed": 1,
            "flagged": 2,
            "by_kind": {"exact": 1, "near": 1, "semantic": 0, "label_leak": 1},
        },
        "thresholds": {"near_hamming": 10},
        "model": {"id": "tiny", "semantic": "ok", "reason": None},
        "items": [
            {
                "key": "cats/1.jpg",
                "label": "cat",
                "sha256": "s1",
                "verdict": "near",
                "matches": [
                    {
                        "id": 11,
                        "kind": "near",
                        "corpus": "laion",
                        "corpus_key": "000/17.jpg",
                        "uri": "/data/000/17.jpg",
                        "cosine": 0.981,
                        "hamming": 3,
                        "evidence": {"mirrored": False},
                        "review": None,
                    }
                ],
            },
            {
                "key": "dogs/x|2.jpg",
                "label": "dog",
                "sha256": "s2",
                "verdict": "exact",
                "matches": [
                    {
                        "id": 12,
                        "kind": "exact",
                        "corpus": "laion",
                        "corpus_key": "000/5.jpg",
                        "uri": "/data/000/5.jpg",
                        "cosine": None,
                        "hamming": 0,
                        "evidence": {},
                        "review": {
                            "verdict": "not_duplicate",
                            "note": "logo",
                            "reviewer": "ann",
                            "at": None,
                        },
                    },
                    {
                        "id": 13,
                        "kind": "label_leak",
                        "corpus": "laion",
                        "corpus_key": "000/5.jpg",
                        "uri": "/data/000/5.jpg",
                        "cosine": None,
                        "hamming": None,
                        "evidence": leak_evidence,
                        "review": None,
                    },
                ],
            },
            {
                "key": "cats/3.jpg",
                "label": "cat",
                "sha256": "s3",
                "verdict": "clean",
                "matches": [],
            },
        ],
        "failed": [{"key": "broken.jpg", "reason": "cannot identify image file"}],
        "split_duplicates": [],
    }


def gated() -> dict[str, Any]:
    report = sample_report()
    return apply_gate(report, evaluate(report, Policy()))


def test_render_dispatches_and_refuses_unknown_formats() -> None:
    report = sample_report()
    assert json.loads(render(report, "json"))["audit_id"] == 3
    assert render(report, "markdown") == render(report, "md")
    assert render(report, "xml") == render(report, "junit")
    with pytest.raises(
        UsageError, match="unknown report format 'pdf'; choose one of json, csv, junit, md"
    ):
        render(report, "pdf")


def test_json_round_trips_with_gate_section() -> None:
    doc = json.loads(render(gated(), "json"))
    assert doc["schema"] == "splitaudit.report/v1"
    assert doc["gate"]["status"] == "failed"
    assert doc["items"][1]["matches"][0]["suppressed_by"] == "review"


def test_csv_has_a_row_per_match_plus_clean_and_failed_items() -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(gated()))))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert [(r["key"], r["kind"], r["verdict"]) for r in rows] == [
        ("cats/1.jpg", "near", "near"),
        ("dogs/x|2.jpg", "exact", "exact"),
        ("dogs/x|2.jpg", "label_leak", "exact"),
        ("cats/3.jpg", "", "clean"),
        ("broken.jpg", "", "failed"),
    ]
    near, exact, leak, clean, broken = rows
    assert (near["corpus_key"], near["hamming"], near["cosine"], near["match_id"]) == (
        "000/17.jpg",
        "3",
        "0.981",
        "11",
    )
    assert near["gate_failed"] == "true" and clean["gate_failed"] == "false"
    assert (exact["review"], exact["suppressed_by"]) == ("not_duplicate", "review")
    assert json.loads(leak["evidence"])["hits"][0]["term"] == "cat"
    assert broken["error"] == "cannot identify image file"


def test_csv_without_gate_leaves_gate_column_empty() -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(sample_report()))))
    assert {r["gate_failed"] for r in rows} == {""}
    assert rows[1]["suppressed_by"] == "review"  # review verdicts are honoured without a gate too


def junit_tree(text: str) -> ET.Element:
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    return ET.fromstring(text.encode("utf-8"))


def test_junit_structure_and_counts_under_the_gate() -> None:
    root = junit_tree(render_junit(gated()))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    for el in (root, suite):
        assert (el.get("tests"), el.get("failures"), el.get("errors"), el.get("skipped")) == (
            "4",
            "1",
            "1",
            "0",
        )
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "cats/1.jpg",
        "dogs/x|2.jpg",
        "cats/3.jpg",
        "broken.jpg",
    ]
    assert {c.get("classname") for c in cases} == {"splitaudit.laion"}
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("type") == "near"
    assert failure.get("message") == "near duplicate of laion:000/17.jpg (hamming 3, cosine 0.981)"
    assert "uri: /data/000/17.jpg" in (failure.text or "")
    # exact match reviewed not_duplicate; the label leak is not in fail_on: passes, both listed in system-out
    assert cases[1].find("failure") is None
    out = cases[1].findtext("system-out") or ""
    assert "label_leak: laion:000/5.jpg" in out and "[review] exact: laion:000/5.jpg" in out
    assert cases[2].find("failure") is None and cases[2].find("system-out") is None
    error = cases[3].find("error")
    assert error is not None and error.get("message") == "cannot identify image file"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["fail_on"] == "exact,near" and props["audit_id"] == "3"


def test_junit_without_gate_fails_every_item_with_counted_matches() -> None:
    suite = junit_tree(render_junit(sample_report())).find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "2"
    failing = [c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failing == ["cats/1.jpg", "dogs/x|2.jpg"]
    leak = suite.findall("testcase")[1].find("failure")
    assert (
        leak is not None
        and leak.get("message")
        == "label leak via laion:000/5.jpg ('cat' in caption: a [[cat]] on a sofa)"
    )


def test_junit_survives_characters_xml_cannot_carry() -> None:
    report = sample_report()
    report["items"][2]["key"] = "weird\x01name.jpg"
    root = junit_tree(render_junit(report))
    assert root.find("testsuite/testcase[3]").get("name") == "weird\ufffdname.jpg"  # type: ignore[union-attr]


def test_markdown_summary_table_and_flagged_items() -> None:
    md = render_markdown(gated())
    lines = md.splitlines()
    assert lines[0] == "## splitaudit leakage audit"
    assert lines[2].startswith("**Gate FAILED**: 1 of 3 readable test images flagged")
    assert "| tier | flagged images | fails the gate |" in lines
    assert "| exact | 0 | yes |" in lines  # suppressed by review: not counted
    assert "| near | 1 | yes |" in lines
    assert "| label_leak | 1 | no |" in lines
    assert "Matches not counted: 1 reviewed not_duplicate, 0 in baseline." in lines
    assert "1 test image could not be read, so was not audited (listed below)." in lines
    assert "| `cats/1.jpg` | cat | near | `laion:000/17.jpg` | hamming 3, cosine 0.981 |" in lines
    assert "- `broken.jpg`: cannot identify image file" in lines


def test_markdown_escapes_table_cells_and_reports_skipped_semantic() -> None:
    report = sample_report()
    report["model"] = {"semantic": "skipped", "reason": "weights missing"}
    md = render_markdown(report)
    assert r"`dogs/x\|2.jpg`" in md
    assert "Semantic tier skipped: weights missing." in md
    assert "Gate" not in md.splitlines()[2]  # no gate section: no verdict line


def test_baseline_suppression_and_stale_entries_are_shown() -> None:
    from splitaudit.indexer.gate.baseline import Baseline, BaselineEntry

    report = sample_report()
    used = BaselineEntry(corpus="laion", kind="near", test_sha256="s1", corpus_key="000/17.jpg")
    stale = BaselineEntry(corpus="laion", kind="near", test_sha256="gone", corpus_key="000/1.jpg")
    gated_report = apply_gate(
        report,
        evaluate(
            report, Policy(max_unreadable=1), Baseline(entries=(used, stale), source="b.json")
        ),
    )
    md = render_markdown(gated_report)
    assert md.splitlines()[2] == "**Gate passed**"
    assert "Matches not counted: 1 reviewed not_duplicate, 1 in baseline." in md
    assert "1 stale baseline entry matched nothing" in md and "`b.json`" in md
    case = junit_tree(render_junit(gated_report)).find("testsuite/testcase")
    assert case is not None and case.find("failure") is None
    assert "[baseline] near: laion:000/17.jpg" in (case.findtext("system-out") or "")


def test_markdown_and_csv_keep_hostile_text_inert() -> None:
    report = sample_report()
    item = report["items"][0]
    item["label"] = "<script>alert(1)</script> | [x](javascript:alert(1))\nnext"
    item["key"] = '=HYPERLINK("http://evil")<img src=x onerror=alert(1)>.jpg'
    item["matches"][0]["corpus_key"] = "a`b|c\nd.jpg"
    report["failed"][0]["reason"] = "<b>bad</b>"
    md = render_markdown(report)
    assert "<script" not in md and "<img" not in md and "<b>" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "\\[x\\](javascript:alert(1))" in md  # not a link
    row = next(line for line in md.splitlines() if "alert" in line and line.startswith("|"))
    # five cells: escaped pipes and the newline do not add or split any
    assert len(row.replace("\\|", "").split("|")) == 7
    assert "`` laion:a`b\\|c d.jpg ``" in md  # a fence longer than the key's backticks
    rows = list(csv.DictReader(io.StringIO(render_csv(report), newline="")))
    assert rows[0]["key"].startswith("'=HYPERLINK")
    assert rows[0]["label"].startswith("<script>")  # CSV keeps the text, only formulas are quoted


def test_the_gate_is_passed_beside_the_report_and_never_written_into_it() -> None:
    report = sample_report()
    gate = evaluate(report, Policy(thresholds={"phash_hamming": 6}, max_unreadable=1)).view()
    doc = json.loads(render(report, "json", gate=gate))
    assert "gate" not in report and "gate_failed" not in report["items"][0]  # untouched
    assert doc["gate"]["policy"]["thresholds"] == {"phash_hamming": 6}  # whole numbers stay whole
    assert [i["gate_failed"] for i in doc["items"]] == [True, False, False]
    assert doc["items"][1]["matches"][0]["suppressed_by"] == "review"
    assert doc == apply_gate(
        report, evaluate(report, Policy(thresholds={"phash_hamming": 6}, max_unreadable=1))
    )
    # every format reads the same verdict from the value
    assert render_markdown(report, gate=gate).splitlines()[2].startswith("**Gate FAILED**")
    assert render(doc, "md") == render(
        report, "md", gate=gate
    )  # a gated file read back renders the same
