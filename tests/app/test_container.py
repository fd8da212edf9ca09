"""The container image without Docker: its entry point, its HEALTHCHECK, and the compose file vs the settings."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from splitaudit.app.container import (
    ENTRYPOINT_ENV,
    beat_while_running,
    migrate_when_reachable,
    worker_alive,
)
from splitaudit.app.settings import ApiSettings

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    # no role or liveness file shared through this machine's /tmp
    env.update(HF_HUB_OFFLINE="1", SPLITAUDIT_ROLE_FILE=os.devnull)
    env.update(extra)
    return env


def _entrypoint(*args: str, env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "splitaudit.app.container", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        **kw,
    )


@pytest.mark.slow
def test_api_migrates_serves_and_passes_its_healthcheck(tmp_path: Path) -> None:
    port = str(_free_port())
    env = _env(
        SPLITAUDIT_HOME=str(tmp_path / "data"),
        SPLITAUDIT_PORT=port,
        SPLITAUDIT_RUN_WORKER="false",
        # The container binds 0.0.0.0, which `serve` refuses without tokens; health needs none.
        SPLITAUDIT_API_TOKENS="ci:secret-token-0123456789",
    )
    assert _entrypoint("healthcheck", env=env).returncode == 1  # nothing listening yet
    log = tmp_path / "api.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "splitaudit.app.container", "api"],
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if (
                    httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        health = _entrypoint("healthcheck", env=env)
        assert health.returncode == 0, health.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert (tmp_path / "data" / "splitaudit.db").is_file()
    assert "is at the latest schema" in log.read_text()


def test_api_gives_up_on_an_unreachable_database_saying_what_to_check(tmp_path: Path) -> None:
    env = _env(
        SPLITAUDIT_DATABASE_URL=f"postgresql+psycopg://u:secret@127.0.0.1:{_free_port()}/none",
        SPLITAUDIT_DB_WAIT_S="0",
        SPLITAUDIT_HOME=str(tmp_path),
    )
    done = _entrypoint("api", env=env)
    assert done.returncode != 0
    assert (
        "did not accept connections within 0s" in done.stderr
        and "SPLITAUDIT_DATABASE_URL" in done.stderr
    )
    assert "secret" not in done.stderr


def test_migration_retries_until_the_database_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import OperationalError

    import splitaudit.indexer.db.migrate as migrate

    calls: list[str] = []
    real = migrate.upgrade

    def flaky(url: str, revision: str = "head") -> None:
        calls.append(url)
        if len(calls) < 3:
            raise OperationalError("connect", {}, ConnectionRefusedError("connection refused"))
        real(url, revision)

    monkeypatch.setattr(migrate, "upgrade", flaky)
    monkeypatch.setenv("SPLITAUDIT_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("SPLITAUDIT_DATABASE_URL", raising=False)
    slept: list[float] = []
    shown = migrate_when_reachable(60, sleep=slept.append)
    assert len(calls) == 3 and slept == [2.0, 2.0] and shown.startswith("sqlite")
    assert (tmp_path / "data" / "splitaudit.db").is_file()


def test_other_commands_pass_through_to_splitaudit() -> None:
    done = _entrypoint("--version", env=_env())
    assert done.returncode == 0 and "splitaudit" in done.stdout


def _compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_builds_one_image_for_api_and_worker_with_known_settings() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"postgres", "api", "worker"}
    api, worker = services["api"], services["worker"]
    assert api["build"] == worker["build"] and api["build"]["context"] == "."
    assert api["image"] == worker["image"]
    assert api["command"] == ["api"] and worker["command"] == ["worker"]
    known = {f"SPLITAUDIT_{name.upper()}" for name in ApiSettings.model_fields} | set(
        ENTRYPOINT_ENV
    )
    for name, service in (("api", api), ("worker", worker)):
        env = service["environment"]
        assert set(env) <= known, f"{name}: unknown settings {set(env) - known}"
        assert "command" in service and "pip install" not in str(service["command"])
        assert not any(str(v).startswith(".:") for v in service.get("volumes", [])), (
            "no source mounted"
        )
        settings = ApiSettings(
            **{
                k.removeprefix("SPLITAUDIT_").lower(): v
                for k, v in env.items()
                if k not in ENTRYPOINT_ENV
            }
        )
        assert settings.database_url and "@postgres:5432/" in settings.database_url
        assert settings.source_roots == [Path("/corpora")]
    assert ApiSettings(run_worker=api["environment"]["SPLITAUDIT_RUN_WORKER"]).run_worker is False
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert worker["depends_on"]["api"]["condition"] == "service_healthy"  # migrated before jobs run
    pg = services["postgres"]["environment"]
    assert (
        f"{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/{pg['POSTGRES_DB']}"
        in api["environment"]["SPLITAUDIT_DATABASE_URL"]
    )


def test_dockerfile_is_multi_stage_non_root_cpu_torch_with_a_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text()
    lines = [
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert len([line for line in lines if line.startswith("FROM ")]) == 2
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in lines
    assert re.search(r"--build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu\d+", text)
    user = [line for line in lines if line.startswith("USER ")]
    assert user and user[-1] != "USER root"
    assert 'CMD ["python", "-m", "splitaudit.app.container", "healthcheck"]' in text
    assert lines.index(next(ln for ln in lines if ln.startswith("HEALTHCHECK"))) > lines.index(
        user[-1]
    )
    assert 'ENTRYPOINT ["python", "-m", "splitaudit.app.container"]' in lines
    assert sum("pip install" in line for line in lines) == 2  # torch, then the wheel: once each
    assert "ARG EXTRAS=embed,hf,postgres" in lines
    assert '"${wheel}${EXTRAS:+[${EXTRAS}]}"' in text  # no extras: the light core
    torch_step = text[text.index("RUN case") : text.index("esac")]
    assert "*,embed,*" in torch_step and "--index-url" in torch_step  # torch only for [embed]
    assert not any(
        line.startswith("COPY") and "--from" not in line
        for line in lines[
            lines.index(next(ln for ln in lines if ln.startswith("FROM") and "runtime" in ln)) :
        ]
    )  # no source in the image


@pytest.mark.slow
def test_the_wheel_carries_the_migrations(tmp_path: Path) -> None:
    import importlib.util

    # Without setuptools in this venv, pip builds in an isolated environment (fetches setuptools).
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            *isolation,
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("splitaudit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {
        n.split("/data/share/splitaudit/", 1)[1] for n in names if "/data/share/splitaudit/" in n
    }
    expected = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "migrations").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert data == expected
    assert "splitaudit/app/container.py" in names and "splitaudit/indexer/thumbnails.py" in names
    assert "splitaudit/app/api/docs_offline.py" in names and "splitaudit/api.py" in names


def test_worker_liveness_file_decides_its_health(tmp_path: Path) -> None:
    alive = tmp_path / "alive"
    assert worker_alive(alive, 60) == 1  # never written: the worker never ran its loop
    alive.write_text(json.dumps({"time": 1000.0, "pid": 1}))
    assert worker_alive(alive, 60, now=lambda: 1059.0) == 0
    assert worker_alive(alive, 60, now=lambda: 1061.0) == 1
    alive.write_text("{half")
    assert worker_alive(alive, 60) == 1


def test_the_beat_stops_when_the_job_loop_does(tmp_path: Path) -> None:
    alive, running, stop = tmp_path / "alive", threading.Event(), threading.Event()
    running.set()
    thread = beat_while_running(alive, 0.02, running=running.is_set, stop=stop)
    try:
        deadline = time.monotonic() + 10
        while not alive.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert worker_alive(alive, 5) == 0
        running.clear()
        time.sleep(0.1)
        written = json.loads(alive.read_text())["time"]
        time.sleep(0.2)
        assert json.loads(alive.read_text())["time"] == written  # no beat without a job loop
        assert worker_alive(alive, 0.1) == 1
    finally:
        stop.set()
        thread.join(5)


@pytest.mark.slow
def test_worker_container_reports_its_own_liveness(tmp_path: Path) -> None:
    alive, role = tmp_path / "worker.alive", tmp_path / "role"
    env = _env(
        SPLITAUDIT_HOME=str(tmp_path / "data"),
        SPLITAUDIT_WORKER_ALIVE_FILE=str(alive),
        SPLITAUDIT_WORKER_BEAT_S="0.2",
        SPLITAUDIT_WORKER_STALE_S="2",
        SPLITAUDIT_ROLE_FILE=str(role),
        SPLITAUDIT_PORT=str(_free_port()),  # nothing listens there: the API check would fail
    )
    log = tmp_path / "worker.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "splitaudit.app.container", "worker", "--poll", "0.1"],
            cwd=REPO,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not alive.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert role.read_text() == "worker"
        health = _entrypoint("healthcheck", env=env)  # the image's one HEALTHCHECK, no argument
        assert health.returncode == 0, health.stderr
        assert (
            _entrypoint("healthcheck", "api", env=env).returncode == 1
        )  # the old, inherited probe
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, log.read_text()
    time.sleep(2.5)
    stale = _entrypoint("healthcheck", "worker", env=env)
    assert stale.returncode == 1 and "last reported" in stale.stderr


def test_compose_gives_each_service_its_own_health_check() -> None:
    services = _compose()["services"]
    probe = ["CMD", "python", "-m", "splitaudit.app.container", "healthcheck"]
    assert services["api"]["healthcheck"]["test"] == [*probe, "api"]
    assert services["worker"]["healthcheck"]["test"] == [*probe, "worker"]
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    assert services["api"]["build"]["args"]["EXTRAS"] == "embed,hf,postgres"


def test_gpu_override_gives_the_worker_cuda_torch_and_the_gpus() -> None:
    override = yaml.safe_load((REPO / "docs" / "docker" / "gpu.override.yml").read_text())
    base = _compose()["services"]
    api, worker = override["services"]["api"], override["services"]["worker"]
    assert set(override["services"]) <= set(base)
    for service in (api, worker):
        assert re.fullmatch(
            r"https://download\.pytorch\.org/whl/cu\d+", service["build"]["args"]["TORCH_INDEX_URL"]
        )
    assert api["image"] == worker["image"] != base["api"]["image"]  # one CUDA image for both
    assert worker["environment"]["SPLITAUDIT_DEVICE"] == "cuda"
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"] and device["driver"] == "nvidia"
    assert ApiSettings(device=worker["environment"]["SPLITAUDIT_DEVICE"]).device == "cuda"


def _docker_engine() -> str | None:
    """None when a Docker engine answers here, else why the image test cannot run."""
    if shutil.which("docker") is None:
        return "no docker client on this machine"
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        return f"no Docker engine answers here ({reason})"
    return None


@pytest.mark.slow
def test_image_builds_and_runs_the_demo(tmp_path: Path) -> None:
    reason = _docker_engine()
    if reason is not None:
        pytest.skip(reason)
    tag = f"splitaudit-test:{os.getpid()}"
    subprocess.run(
        ["docker", "build", "-q", "--build-arg", "EXTRAS=embed,demo", "-t", tag, str(REPO)],
        check=True,
        timeout=3600,
    )
    try:
        done = subprocess.run(
            ["docker", "run", "--rm", tag, "demo", "--home", "/data"],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr
        assert "planted leaks" in done.stdout
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)
