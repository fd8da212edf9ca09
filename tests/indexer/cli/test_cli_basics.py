"""CLI basics: every command has --help, bad arguments exit 2 with one line, db upgrade, index."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import photo

from splitaudit.indexer.cli.main import cli


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, (*prefix, name)))
    return out


def test_expected_commands_exist() -> None:
    names = {c[0] for c in _commands(cli)}
    assert {"index", "audit", "serve", "worker", "db", "demo", "baseline"} <= names


@pytest.mark.parametrize("command", _commands(cli), ids=" ".join)
def test_every_command_has_help_text(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output
    cmd: click.Command = cli
    for part in command:
        assert isinstance(cmd, click.Group)
        found = cmd.get_command(click.Context(cmd), part)
        assert found is not None
        cmd = found
    assert (cmd.help or "").strip(), f"{' '.join(command)} has no help text"


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "splitaudit.indexer.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_index_bad_arguments_exit_2_without_traceback(tmp_path: Path) -> None:
    missing = _run(
        "index",
        str(tmp_path / "nope"),
        "--corpus",
        "c",
        "--home",
        str(tmp_path / "h"),
        "--no-embed",
    )
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    bad_name = _run(
        "index", str(tmp_path), "--corpus", "../evil", "--home", str(tmp_path / "h"), "--no-embed"
    )
    assert bad_name.returncode == 2 and "invalid corpus name" in bad_name.stderr
    no_corpus = _run("index", str(tmp_path))
    assert no_corpus.returncode == 2 and "--corpus" in no_corpus.stderr


def test_default_model_unavailable_offline_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    photo(1, (64, 64)).save(tmp_path / "c" / "a.png")
    res = _run("index", str(tmp_path / "c"), "--corpus", "c", "--home", str(tmp_path / "h"))
    assert res.returncode == 2
    assert "efficientnet-lite0" in res.stderr and "Traceback" not in res.stderr


def test_index_prints_summary_with_failures(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    photo(1, (64, 64)).save(tmp_path / "c" / "a.png")
    (tmp_path / "c" / "zero.jpg").write_bytes(b"")
    res = _run(
        "index",
        str(tmp_path / "c"),
        "--corpus",
        "c",
        "--home",
        str(tmp_path / "h"),
        "--no-embed",
        "--json",
        str(tmp_path / "s.json"),
    )
    assert res.returncode == 0, res.stderr
    assert "indexed 1" in res.stdout and "failed 1" in res.stdout and "zero.jpg" in res.stdout
    assert '"indexed": 1' in (tmp_path / "s.json").read_text()


def test_db_upgrade(tmp_path: Path) -> None:
    res = _run("db", "upgrade", "--home", str(tmp_path / "h"))
    assert res.returncode == 0 and "latest schema" in res.stdout
    assert (tmp_path / "h" / "splitaudit.db").exists()
