"""One version everywhere: pyproject.toml's, as installed, is what the CLI, the API and reports say."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from click.testing import CliRunner

import splitaudit
from splitaudit.indexer import __version__
from splitaudit.indexer.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_pyprojects() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == splitaudit.__version__ == version("splitaudit") == declared
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"splitaudit, version {declared}"
