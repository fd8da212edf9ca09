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
        [sys.executable, "-m", "indexer.cli.main", "demo"],
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
