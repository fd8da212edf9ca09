"""Corpus blocklist and clean split from an audit: CLI files match the report, reviews are respected."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner
from conftest import photo
from PIL import Image

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.gate.decontaminate import blocklist_rows, clean_split_rows
from splitaudit.indexer.review.matches import set_review
from splitaudit.indexer.workspace import Workspace


def _invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.output


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    corpus, split = tmp_path / "corpus", tmp_path / "split"
    corpus.mkdir()
    split.mkdir()
    for seed in range(6):
        photo(seed).save(corpus / f"img{seed}.png")
    (split / "exact.png").write_bytes((corpus / "img0.png").read_bytes())
    photo(3).resize((256, 192), Image.Resampling.LANCZOS).save(split / "leaked.jpg", quality=85)
    for seed in (100, 101):
        photo(seed).save(split / f"t{seed}.png")
    home = tmp_path / "home"
    code, out = _invoke("index", corpus, "--corpus", "ref", "--home", home, "--no-embed")
    assert code == 0, out
    return home, split


def _audit(tmp_path: Path, home: Path, split: Path, tag: str) -> tuple[int, dict, Path]:
    out_dir = tmp_path / tag
    code, _out = _invoke(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        home,
        "--fail-on",
        "exact,near",
        "--json",
        out_dir / "r.json",
        "--corpus-blocklist",
        out_dir / "block.csv",
        "--corpus-blocklist",
        out_dir / "block.txt",
        "--corpus-blocklist",
        out_dir / "block.parquet",
        "--clean-split",
        out_dir / "clean.txt",
        "--clean-split",
        out_dir / "clean.csv",
    )
    return code, json.loads((out_dir / "r.json").read_text()), out_dir


def test_blocklist_and_clean_split_match_the_report_and_follow_reviews(tmp_path: Path) -> None:
    home, split = _setup(tmp_path)
    code, report, out = _audit(tmp_path, home, split, "first")
    assert code == 1
    matched = {
        m["corpus_key"]
        for it in report["items"]
        for m in it["matches"]
        if m["kind"] in ("exact", "near")
    }
    assert matched == {"img0.png", "img3.png"}
    with open(out / "block.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["key"] for r in rows} == matched and {r["corpus"] for r in rows} == {"ref"}
    assert set(rows[0]) == {"corpus", "key", "url", "shard"}
    assert sorted((out / "block.txt").read_text().split()) == sorted(matched)
    assert set(pq.read_table(out / "block.parquet").to_pydict()["key"]) == matched
    clean = {it["key"] for it in report["items"] if it["verdict"] == "clean"}
    assert set((out / "clean.txt").read_text().split()) == clean == {"t100.png", "t101.png"}
    with open(out / "clean.csv", newline="") as fh:
        manifest = list(csv.DictReader(fh))
    assert {Path(r["path"]) for r in manifest} == {(split / k).resolve() for k in clean}

    # The reviewer says the resized copy is not a duplicate: the next audit's outputs follow.
    leaked = next(m for it in report["items"] if it["key"] == "leaked.jpg" for m in it["matches"])
    ws = Workspace.open(home)
    try:
        with transaction(ws.sessions) as s:
            set_review(
                s,
                match_id=leaked["id"],
                verdict="not_duplicate",
                note="different crop",
                reviewer="qa",
            )
    finally:
        ws.close()
    _code, _report, out2 = _audit(tmp_path, home, split, "second")
    assert (out2 / "block.txt").read_text().split() == ["img0.png"]
    assert set((out2 / "clean.txt").read_text().split()) == clean | {"leaked.jpg"}


def test_reviewed_duplicate_is_always_blocked_and_unreadable_items_are_never_clean() -> None:
    report = {
        "items": [
            {
                "key": "a",
                "label": None,
                "matches": [
                    {
                        "kind": "semantic",
                        "corpus": "c",
                        "corpus_key": "x",
                        "url": "u",
                        "shard": "s",
                        "review": {"verdict": "duplicate"},
                    },
                    {
                        "kind": "near",
                        "corpus": "c",
                        "corpus_key": "y",
                        "review": None,
                        "suppressed_by": "baseline",
                    },
                ],
            },
            {
                "key": "b",
                "label": "cat",
                "matches": [{"kind": "label_leak", "corpus": None, "corpus_key": None}],
            },
        ],
        "failed": [{"key": "broken", "reason": "truncated"}],
    }
    assert blocklist_rows(report, ["exact", "near"]) == [
        {"corpus": "c", "key": "x", "url": "u", "shard": "s"}
    ]
    assert [r["key"] for r in clean_split_rows(report, ["exact", "near"])] == ["a", "b"]
    assert [r["key"] for r in clean_split_rows(report, ["label_leak"])] == ["a"]
