"""A local Ray cluster for tests: ``ray start --head`` on a free port, two CPUs (two worker processes).

The cluster runs under ``ray start --block`` in a session of its own, so stopping it
(SIGTERM to that process group) stops this cluster's processes only, never another one on
the machine (``ray stop`` would stop every Ray on it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

START_TIMEOUT_S = 90.0


# ports Ray binds by default whatever --port says: the dashboard, its agent's HTTP port, the
# client server, the default head port; and the range its workers bind in
_RAY_DEFAULT_PORTS = frozenset({6379, 8265, 10001, 52365})
_RAY_WORKER_PORTS = range(10002, 20000)


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now, none of them one Ray picks on its own: a head on
    52365 (Ray's dashboard-agent default) failed to start with "used by other components"."""
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
            if port not in _RAY_DEFAULT_PORTS and port not in _RAY_WORKER_PORTS:
                ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports


def _ray_cli() -> str:
    script = Path(sys.executable).parent / "ray"
    return str(script) if script.exists() else shutil.which("ray") or ""


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def local_ray_cluster(cpus: int = 2) -> Iterator[str]:
    """The address (``127.0.0.1:PORT``) of a fresh head node with ``cpus`` CPUs; stopped on exit.

    Skips the test (with the reason) when Ray is not installed.
    """
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'splitaudit[ray]')")
    cli = _ray_cli()
    if not cli:
        pytest.skip("Ray is installed but its `ray` command is not on PATH")
    port, agent_http, agent_grpc, metrics = _free_ports(4)
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths are bounded
    # Token authentication off for this throwaway cluster and the test's driver alike: a token
    # left in ~/.ray by another Ray would otherwise not match this head's.
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen(
        [
            cli,
            "start",
            "--head",
            f"--port={port}",
            f"--dashboard-agent-listen-port={agent_http}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--metrics-export-port={metrics}",
            f"--num-cpus={cpus}",
            "--num-gpus=0",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
            "--block",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _port_open(port):
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"ray start exited with {proc.returncode}: {err[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"ray start did not listen on {address} in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        yield address
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved
