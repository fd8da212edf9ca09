"""``.ci/run`` runs ruff and mypy before the tests, and its last line is the README's test command."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ci_checks_lint_format_and_types_then_runs_the_readme_test_command() -> None:
    lines = [
        line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip()
    ]
    readme = (REPO / "README.md").read_text()
    assert lines[-1].endswith("python -m pytest -q") and f"\n{lines[-1]}\n" in readme
    checks = [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".ci/mypy .venv/bin/mypy",
    ]
    positions = [lines.index(check) for check in checks]
    assert positions == sorted(positions) and positions[-1] < len(lines) - 1
