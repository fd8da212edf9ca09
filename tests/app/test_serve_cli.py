"""``splitaudit serve`` and ``splitaudit worker``: help, settings errors, a worker process running jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apptest_support import new_home, workspace
from click.testing import CliRunner

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.jobs.queue import enqueue, get_job

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


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("mysql://nope", "unsupported database URL"),
        (
            "postgresql+psycopg://nobody:pw@127.0.0.1:1/none?connect_timeout=2",
            "cannot open the database at 127.0.0.1:1",
        ),
    ],
)
def test_bad_database_url_exits_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, text: str
) -> None:
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
            job_id = enqueue(
                s,
                kind="index",
                params={"corpus": "web", "sources": [str(tmp_path / "gone")], "no_embed": True},
            ).id
        proc = subprocess.Popen(
            [SPLITAUDIT, "worker", "--home", str(home), "--poll", "0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
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


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.org"])
def test_serve_refuses_a_non_loopback_host_without_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    monkeypatch.delenv("SPLITAUDIT_API_TOKENS", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--home", str(tmp_path / "h"), "--host", host])
    assert result.exit_code == 2
    assert f"refusing to listen on {host} without API tokens" in result.output
    assert "--allow-anonymous" in result.output
    assert not (tmp_path / "h").exists()  # refused before anything was created


def test_exposure_rules() -> None:
    from splitaudit.app.settings import ApiSettings
    from splitaudit.indexer.cli.serve_cmd import check_exposure, is_loopback_host

    assert all(is_loopback_host(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback_host(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.org"))
    open_settings = ApiSettings(api_tokens={})
    assert check_exposure(open_settings, "127.0.0.1", allow_anonymous=False) is None
    assert (
        check_exposure(ApiSettings(api_tokens={"a": "t" * 16}), "0.0.0.0", allow_anonymous=False)
        is None
    )
    warning = check_exposure(open_settings, "0.0.0.0", allow_anonymous=True)
    assert warning is not None and "WITHOUT API TOKENS" in warning


def test_serve_allow_anonymous_starts_with_a_loud_warning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    proc = subprocess.Popen(
        [
            SPLITAUDIT,
            "serve",
            "--home",
            str(tmp_path / "h"),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--allow-anonymous",
            "--no-worker",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "WARNING: serving on 0.0.0.0 WITHOUT API TOKENS (--allow-anonymous)" in first
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
