"""The import contracts of docs/architecture.md hold: layers point down, no cycles, no private names across modules."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".ci" / "importlinter.ini"


def _link_tree(into: Path) -> Path:
    """The package as the wheel installs it (indexer/public -> splitaudit, indexer -> splitaudit.indexer,
    app -> splitaudit.app), as symlinks: what .ci/mypy reads too."""
    tree = into / "splitaudit"
    tree.mkdir(parents=True)
    for module in (ROOT / "indexer" / "public").glob("*.py"):
        (tree / module.name).symlink_to(module)
    (tree / "indexer").symlink_to(ROOT / "indexer", target_is_directory=True)
    (tree / "app").symlink_to(ROOT / "app", target_is_directory=True)
    return into


def test_import_contracts_hold(tmp_path: Path) -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
        "lint-imports"
    )
    if lint is None:
        pytest.skip(
            "import-linter is not installed (pip install import-linter): contracts not checked"
        )
    tree = _link_tree(tmp_path / "tree")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = subprocess.run(
        [lint, str(CONFIG), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "0 broken" in out and "6 kept" in out, out


def _private_imports(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module.split(".")[0] != "splitaudit":
                continue
            private = [
                a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
            ]
            if private:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module} {private}")
    return found


def test_no_private_names_imported_across_modules() -> None:
    found = _private_imports(ROOT / "indexer") + _private_imports(ROOT / "app")
    assert not found, "private names imported from another module:\n" + "\n".join(found)
