"""``splitaudit serve`` and ``splitaudit worker``: help, settings errors, a worker process running jobs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apptest_support import new_home, workspace
from click.testing import CliRunner

from indexer.cli.main import cli
from indexer.db.engine import transaction
from indexer.jobs.queue import enqueue, get_job

SPLITAUDIT = str(Path(sys.executable).parent / "splitaudit")


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_help(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "--home" in result.output
    assert ("--port" in result.output) == (command == "serve")
    assert ("--poll" in result.output) == (command == "worker")


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_bad_settings_exit_2(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPLITAUDIT_API_TOKENS", "no-colon-here")
    result = CliRunner().invoke(cli, [command, "--home", str(tmp_path / "h")])
    assert result.exit_code == 2
    assert "invalid server settings" in result.output and "SPLITAUDIT_API_TOKENS" in result.output


@pytest.mark.parametrize(("url", "text"), [
    ("mysql://nope", "unsupported database URL"),
    ("postgresql+psycopg://nobody:pw@127.0.0.1:1/none?connect_timeout=2", "cannot open the database at 127.0.0.1:1"),
])
def test_bad_database_url_exits_before_serving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str,
                                               text: str) -> None:
    monkeypatch.setenv("SPLITAUDIT_DATABASE_URL", url)
    result = CliRunner().invoke(cli, ["serve", "--home", str(tmp_path / "h")])
    assert result.exit_code == 2
    assert text in result.output
    assert "pw@" not in result.output


def test_worker_process_runs_jobs_and_stops_on_sigterm(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    ws = workspace(home)
    try:
        with transaction(ws.sessions) as s:
            job_id = enqueue(s, kind="index", params={"corpus": "web", "sources": [str(tmp_path / "gone")],
                                                      "no_embed": True}).id
        proc = subprocess.Popen([SPLITAUDIT, "worker", "--home", str(home), "--poll", "0.1"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with ws.sessions() as s:
                    job = get_job(s, job_id=job_id)
                if job.status == "failed":
                    break
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=60)
    finally:
        ws.close()
    assert job.status == "failed" and "does not exist" in (job.error or "")
    assert proc.returncode == 0
    assert "SQLite database: run only one worker" in output and "SIGTERM" in output
