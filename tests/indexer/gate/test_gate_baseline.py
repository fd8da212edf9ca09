"""Baseline files: export from a reviewed report, write/read round trip, validation, merging."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from splitaudit.indexer.errors import InputError, UsageError
from splitaudit.indexer.gate.baseline import (
    SCHEMA,
    Baseline,
    BaselineEntry,
    baseline_from_report,
    load_baseline,
    merge_baselines,
    write_baseline,
)


def reviewed_report() -> dict[str, Any]:
    def m(
        mid: int, kind: str, key: str | None, verdict: str | None, note: str | None = None
    ) -> dict[str, Any]:
        review = {"verdict": verdict, "note": note, "reviewer": "ann", "at": "2024-01-01T00:00:00"}
        return {
            "id": mid,
            "kind": kind,
            "corpus": "laion",
            "corpus_key": key,
            "sha256": f"c-{key}",
            "review": review if verdict else None,
        }

    return {
        "schema": "splitaudit.report/v1",
        "items": [
            {
                "key": "a.jpg",
                "sha256": "sa",
                "pixel_digest": "pa",
                "matches": [
                    m(1, "near", "k1", "not_duplicate", "different cat"),
                    m(2, "near", "k2", "duplicate"),
                    m(3, "semantic", "k3", None),
                ],
            },
            {
                "key": "b.jpg",
                "sha256": "sb",
                "pixel_digest": None,
                "matches": [
                    m(4, "label_leak", None, "not_duplicate"),
                    m(5, "near", "k1", "unsure"),
                ],
            },
        ],
        "failed": [],
    }


def test_export_keeps_only_not_duplicate_verdicts() -> None:
    b = baseline_from_report(reviewed_report())
    assert [(e.test_key, e.corpus_key, e.kind) for e in b.entries] == [
        ("a.jpg", "k1", "near"),
        ("b.jpg", None, "label_leak"),
    ]
    first = b.entries[0]
    assert (first.test_sha256, first.test_pixel_digest, first.corpus_sha256, first.note) == (
        "sa",
        "pa",
        "c-k1",
        "different cat",
    )


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    b = baseline_from_report(reviewed_report())
    write_baseline(path, b, origin={"audit_id": 4})
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and doc["origin"] == {"audit_id": 4}
    assert set(doc["entries"][0]) == {
        "test_sha256",
        "test_pixel_digest",
        "test_key",
        "corpus",
        "corpus_key",
        "corpus_sha256",
        "kind",
        "note",
    }
    loaded = load_baseline(path)
    assert set(loaded.entries) == set(b.entries)
    assert loaded.source == str(path)


def test_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match="does not exist; create it with `splitaudit baseline export`"
    ):
        load_baseline(tmp_path / "nope.json")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": "other"}', "not a splitaudit baseline"),
        ("[]", "not a splitaudit baseline"),
        (json.dumps({"schema": SCHEMA, "entries": {}}), "'entries' must be a list"),
        (
            json.dumps({"schema": SCHEMA, "entries": [{"kind": "near", "corpus": "x"}]}),
            "entry 0: a baseline entry needs test_sha256",
        ),
        (
            json.dumps({"schema": SCHEMA, "entries": [{"kind": "dup", "test_sha256": "s"}]}),
            "entry 0: .*kind 'dup'",
        ),
        (
            json.dumps({"schema": SCHEMA, "entries": [{"kind": "near", "test_sha256": ["s"]}]}),
            "must be a string",
        ),
    ],
)
def test_bad_files_are_input_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        load_baseline(path)


def test_entry_needs_a_test_hash() -> None:
    with pytest.raises(UsageError):
        BaselineEntry(corpus="laion", kind="near")


def test_merge_dedupes() -> None:
    e1 = BaselineEntry(corpus="c", kind="near", test_sha256="a", corpus_key="k")
    e2 = BaselineEntry(corpus="c", kind="near", test_sha256="b", corpus_key="k")
    merged = merge_baselines([Baseline(entries=(e1,)), Baseline(entries=(e1, e2))])
    assert merged.entries == (e1, e2)


def test_describe_names_the_pair() -> None:
    e = BaselineEntry(
        corpus="laion", kind="near", test_sha256="abcdef0123456789", corpus_key="000/1"
    )
    assert e.describe() == "abcdef012345 ~ laion:000/1 (near)"
