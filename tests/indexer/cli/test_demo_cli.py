"""`splitaudit demo` (the README's first command) finds exactly the planted leaks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_flags_exactly_the_planted_leaks(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "splitaudit.indexer.cli.main", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    out = tmp_path / ".splitaudit" / "demo"
    report = json.loads((out / "report.json").read_text())
    verdicts = {it["key"]: it["verdict"] for it in report["items"]}
    assert verdicts == {
        "astronaut/copy.jpg": "exact",
        "coffee/resized.jpg": "near",
        "cat/cropped.jpg": "near",
        "rocket/mirrored.png": "near",
        "photographer/fresh0.jpg": "clean",
        "coins/fresh1.jpg": "clean",
        "grass/fresh2.jpg": "clean",
        "moon/fresh3.jpg": "clean",
    }
    assert report["model"]["semantic"] == "ok"
    assert (out / "report.md").read_text().strip()
    assert (out / "report.html").read_text().count('<section class="pair') >= 4
    assert "4 flagged" in res.stdout
    # Everything lands under the (git-ignored) home: a checkout gets no untracked folder.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".splitaudit"]
    assert (
        ".splitaudit/" in (Path(__file__).resolve().parents[3] / ".gitignore").read_text().split()
    )
    # the default backend (auto) exported the model once; a second demo starts from that export
    assert list((tmp_path / ".splitaudit" / "exports" / "launch").glob("*/*.json"))
    again = subprocess.run(
        [sys.executable, "-m", "splitaudit.indexer.cli.main", "-v", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    assert "started from its launch record" in again.stderr
    assert {
        it["key"]: it["verdict"] for it in json.loads((out / "report.json").read_text())["items"]
    } == verdicts


def test_demo_refuses_a_backend_that_is_not_installed(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "splitaudit.indexer.cli.main", "demo", "--backend", "tensorrt"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "tensorrt" in res.stderr
    assert not (tmp_path / ".splitaudit" / "demo").exists()  # refused before writing anything
