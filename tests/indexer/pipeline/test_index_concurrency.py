"""Several processes on one SQLite home: the home is created once, a corpus is indexed by one
run at a time (the second is refused naming the first), and a killed start leaves nothing to
trip on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import func, select

from splitaudit.indexer.db.models import Item
from splitaudit.indexer.pipeline.corpus_lock import CorpusBusyError, corpus_index_lock
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace

OPEN_HOME = (
    "import sys\n"
    "from pathlib import Path\n"
    "from splitaudit.indexer.workspace import Workspace\n"
    "Workspace.open(Path(sys.argv[1])).close()\n"
)


def test_processes_creating_one_new_home_at_once_all_succeed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_HOME, str(home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(p.wait(120), p.stderr.read() if p.stderr else "") for p in procs]
    assert all(code == 0 for code, _ in results), results
    ws = Workspace.open(home)
    try:
        with ws.sessions() as s:
            assert s.scalar(select(func.count(Item.id))) == 0
    finally:
        ws.close()


def test_an_empty_database_file_left_by_a_kill_is_created_afresh(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "splitaudit.db").write_bytes(b"")
    (home / "exports").mkdir()  # a partial export folder from the same kill
    (home / "exports" / ".abc.tmp").mkdir()
    ws = Workspace.open(home)
    try:
        with ws.sessions() as s:
            assert s.scalar(select(func.count(Item.id))) == 0
    finally:
        ws.close()


def test_a_second_index_run_on_a_busy_corpus_is_refused_naming_the_first(tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(2):
        photo(i, (64, 48)).save(folder / f"{i}.png")
    ws = Workspace.open(tmp_path / "home")
    try:
        with corpus_index_lock(ws, "c"):
            with pytest.raises(CorpusBusyError, match=r"being indexed by another process \(pid"):
                index_sources(ws, "c", [FolderSource(folder)], embedder=None)
            # Another corpus is free.
            assert index_sources(ws, "d", [FolderSource(folder)], embedder=None).indexed == 2
        assert index_sources(ws, "c", [FolderSource(folder)], embedder=None).indexed == 2
    finally:
        ws.close()


def test_the_cli_refuses_a_concurrent_index_with_exit_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from splitaudit.indexer.cli.main import cli

    folder = tmp_path / "photos"
    folder.mkdir()
    photo(1, (64, 48)).save(folder / "1.png")
    ws = Workspace.open(tmp_path / "home")
    try:
        with corpus_index_lock(ws, "c"):
            result = CliRunner().invoke(
                cli,
                [
                    "index",
                    str(folder),
                    "--corpus",
                    "c",
                    "--home",
                    str(tmp_path / "home"),
                    "--no-embed",
                ],
            )
    finally:
        ws.close()
    assert result.exit_code == 2, result.output
    assert "being indexed by another process" in result.output
