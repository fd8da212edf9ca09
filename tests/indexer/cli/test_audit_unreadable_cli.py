"""``splitaudit audit`` on a split whose images cannot be read: the gate fails unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import photo
from test_audit_cli import indexed_home, run, workdir

__all__ = ["indexed_home", "workdir"]  # fixtures shared with test_audit_cli


def _unreadable_split(root: Path) -> Path:
    root.mkdir()
    (root / "empty.png").write_bytes(b"")
    (root / "text.jpg").write_bytes(b"this is not an image")
    photo(7).save(root / "whole.png")
    (root / "truncated.png").write_bytes((root / "whole.png").read_bytes()[:200])
    (root / "whole.png").unlink()
    return root


@pytest.mark.slow
def test_all_unreadable_split_fails_the_gate_and_every_report_lists_them(
    workdir: Path, indexed_home: Path
) -> None:
    split = _unreadable_split(workdir / "bad")
    out = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--json",
        "r.json",
        "--junit",
        "r.xml",
        "--markdown",
        "r.md",
        cwd=workdir,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "3 could not be read and were not audited" in out.stdout
    assert "Gate FAILED" in out.stdout and "--max-unreadable" in out.stdout
    report = json.loads((workdir / "r.json").read_text())
    assert sorted(f["key"] for f in report["failed"]) == ["empty.png", "text.jpg", "truncated.png"]
    assert sorted(report["gate"]["unreadable_keys"]) == ["empty.png", "text.jpg", "truncated.png"]
    for name in ("r.xml", "r.md"):
        text = (workdir / name).read_text()
        assert all(key in text for key in ("empty.png", "text.jpg", "truncated.png")), name

    relaxed = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--max-unreadable",
        "3",
        cwd=workdir,
    )
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    by_rate = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--max-unreadable-rate",
        "50%",
        cwd=workdir,
    )
    assert by_rate.returncode == 1, by_rate.stdout
    (workdir / "splitaudit.toml").write_text("max_unreadable_rate = 1.0\n")
    from_file = run("audit", split, "--corpus", "ref", "--home", indexed_home, cwd=workdir)
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
