"""``splitaudit dedup`` on an indexed corpus and on a folder indexed on the fly: outputs and errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner
from helpers.planted_dedup import plant

from splitaudit.indexer.cli.main import cli


def _invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def test_dedup_indexed_corpus_writes_clusters_and_drop_lists(tmp_path: Path) -> None:
    truth = plant(tmp_path / "corpus")
    home = tmp_path / "home"
    code, out = _invoke("index", tmp_path / "corpus", "--corpus", "c", "--home", home, "--no-embed")
    assert code == 0, out
    code, out = _invoke(
        "dedup",
        "--corpus",
        "c",
        "--home",
        home,
        "--json",
        tmp_path / "o.json",
        "--csv",
        tmp_path / "o.csv",
        "--parquet",
        tmp_path / "o.parquet",
        "--drop-list",
        tmp_path / "drop.txt",
    )
    assert code == 0, out
    assert "4 duplicate clusters" in out
    report = json.loads((tmp_path / "o.json").read_text())
    clusters = {frozenset(m["key"] for m in c["members"]) for c in report["clusters"]}
    assert clusters == {frozenset(v) for v in truth.values()}
    kept = {c["kept"] for c in report["clusters"]}
    members = {k for v in truth.values() for k in v}
    dropped = (tmp_path / "drop.txt").read_text().split()
    assert sorted(dropped) == sorted(members - kept)
    with open(tmp_path / "o.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["key"] for r in rows} == members and sum(r["kept"] == "True" for r in rows) == 4
    assert pq.read_table(tmp_path / "o.parquet").num_rows == len(members)
    code, out = _invoke(
        "dedup",
        "--corpus",
        "c",
        "--home",
        home,
        "--threshold",
        "phash_hamming=0",
        "--threshold",
        "candidate_hamming=0",
        "--json",
        tmp_path / "strict.json",
    )
    assert code == 0, out
    strict = json.loads((tmp_path / "strict.json").read_text())
    assert strict["thresholds"]["phash_hamming"] == 0 and len(strict["clusters"]) < len(truth)
    code, out = _invoke(
        "dedup",
        "--corpus",
        "c",
        "--home",
        home,
        "--keep",
        "first",
        "--drop-list",
        tmp_path / "drop.parquet",
    )
    assert code == 0, out
    table = pq.read_table(tmp_path / "drop.parquet").to_pydict()
    assert set(table) == {"key", "url"} and "orig3.png" in table["key"]


def test_dedup_of_a_folder_without_an_index(tmp_path: Path) -> None:
    truth = plant(tmp_path / "corpus")
    code, out = _invoke(
        "dedup", tmp_path / "corpus", "--no-embed", "--drop-list", tmp_path / "drop.csv"
    )
    assert code == 0, out
    with open(tmp_path / "drop.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    members = {k for v in truth.values() for k in v}
    assert {r["key"] for r in rows} < members and len(rows) == len(members) - len(truth)


def test_dedup_usage_errors(tmp_path: Path) -> None:
    code, out = _invoke("dedup", "--home", tmp_path / "none")
    assert code == 2 and "either --corpus" in out
    code, out = _invoke("dedup", "--corpus", "c", "--home", tmp_path / "none")
    assert code == 3 and "no splitaudit index" in out
    (tmp_path / "f").mkdir()
    code, out = _invoke(
        "dedup", tmp_path / "f", "--no-embed", "--drop-list", tmp_path / "drop.xlsx"
    )
    assert code == 2 and ".txt" in out
