"""CSV formula injection: every CSV we write quotes formula-like cells, and our reader undoes it."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from PIL import Image

from splitaudit.indexer.csv_cells import csv_lines, csv_safe, csv_text, csv_unescape
from splitaudit.indexer.dedup.outputs import write_drop_list
from splitaudit.indexer.gate.decontaminate import write_blocklist, write_clean_split
from splitaudit.indexer.sources.open import open_split

HOSTILE = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "'=quoted"]


@pytest.mark.parametrize("value", HOSTILE)
def test_formula_cells_get_a_quote_and_come_back(value: str) -> None:
    cell = csv_safe(value)
    assert cell == "'" + value
    assert csv_unescape(cell) == value


@pytest.mark.parametrize("value", ["cat.jpg", "a=b", "", "it's", 3, -0.5, 1.25])
def test_other_cells_are_written_as_they_are(value: object) -> None:
    assert csv_safe(value) == value
    if isinstance(value, str):
        assert csv_unescape(value) == value
    assert csv_safe(None) == ""
    assert csv_unescape(csv_safe("'tis")) == "'tis"  # a leading quote of its own survives


def test_csv_text_quotes_every_text_cell_and_streams_in_chunks() -> None:
    rows = [{"key": v, "n": -1, "extra": "ignored"} for v in HOSTILE]
    text = csv_text(rows, ("key", "n"))
    parsed = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["key"] for r in parsed] == ["'" + v for v in HOSTILE]
    assert {r["n"] for r in parsed} == {"-1"}  # numbers are not formulas
    chunks = list(csv_lines(rows, ("key", "n"), chunk=2))
    assert len(chunks) == 4 and "".join(chunks) == text


def test_drop_list_and_blocklist_csv_are_neutralised(tmp_path: Path) -> None:
    write_drop_list(tmp_path / "drop.csv", [("=cmd|' /C calc'!A0", "@evil")])
    row = next(csv.DictReader((tmp_path / "drop.csv").open(encoding="utf-8")))
    assert (row["key"], row["url"]) == ("'=cmd|' /C calc'!A0", "'@evil")
    write_blocklist(tmp_path / "block.csv", [{"corpus": "c", "key": "-x.jpg", "kind": "near"}])
    row = next(csv.DictReader((tmp_path / "block.csv").open(encoding="utf-8")))
    assert row["key"] == "'-x.jpg"


def test_clean_split_csv_reads_back_as_the_same_split(tmp_path: Path) -> None:
    split = tmp_path / "split"
    split.mkdir()
    names = ["=1+2.png", "-dash.png", "plain.png"]
    for i, name in enumerate(names):
        Image.new("RGB", (8, 8), (i * 40, 0, 0)).save(split / name)
    rows = [{"key": n, "path": str(split / n), "label": "@cat"} for n in names]
    manifest = tmp_path / "clean.csv"
    write_clean_split(manifest, rows)
    text = manifest.read_text(encoding="utf-8")
    assert "'=1+2.png" in text and "'@cat" in text
    source = open_split(manifest)
    records = [r for shard in source.shards() for r in source.records(shard)]
    assert sorted(r.key for r in records) == sorted(names)
    assert {r.label for r in records} == {"@cat"}
    assert all(r.error is None for r in records)
