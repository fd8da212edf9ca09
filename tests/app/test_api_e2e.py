"""End to end over HTTP: a real index, `splitaudit serve` in a subprocess, uploads, reports, a SIGKILL."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import photo

pytestmark = pytest.mark.slow

SPLITAUDIT = str(Path(sys.executable).parent / "splitaudit")
REPO = Path(__file__).resolve().parents[2]
# A server whose jobs sleep a second after each progress report (tests/helpers/slow_jobs.py).
SLOW_SERVE = [
    sys.executable,
    "-m",
    "uvicorn",
    "--factory",
    "helpers.slow_jobs:create_slow_app",
    "--app-dir",
    str(REPO / "tests"),
    "--host",
    "127.0.0.1",
]
CORPUS_IMAGES = 12
PLANTED = 5  # corpus photo planted into the test split


def _jpeg(seed: int, size: tuple[int, int] = (160, 120)) -> bytes:
    out = io.BytesIO()
    photo(seed, size).save(out, format="JPEG", quality=90)
    return out.getvalue()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    env.update(
        HF_HUB_OFFLINE="1",
        SPLITAUDIT_HOME=str(home),
        SPLITAUDIT_TORCH_THREADS="1",
        OMP_NUM_THREADS="1",
        **extra,
    )
    return env


def _index(tmp_path: Path, model_spec: str, **env: str) -> Path:
    """A home with corpus 'web' indexed by `splitaudit index` (tiny seeded model) from generated photos."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in range(CORPUS_IMAGES):
        (corpus / f"img{seed:03d}.jpg").write_bytes(_jpeg(seed))
    home = tmp_path / "home"
    out = subprocess.run(
        [
            SPLITAUDIT,
            "index",
            str(corpus),
            "--corpus",
            "web",
            "--home",
            str(home),
            "--model",
            model_spec,
        ],
        env=_env(home, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return home


@pytest.fixture
def indexed_home(tmp_path: Path, tiny_model_spec: str) -> Path:
    """A home with an indexed corpus 'web' in its SQLite database."""
    return _index(tmp_path, tiny_model_spec)


@dataclass
class Server:
    """A `splitaudit serve` subprocess."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)


def _start(
    home: Path, log: Path, *args: str, command: list[str] | None = None, **env: str
) -> Server:
    port = _free_port()
    argv = (
        [*command, "--port", str(port), "--log-level", "warning"]
        if command
        else [
            SPLITAUDIT,
            "serve",
            "--home",
            str(home),
            "--port",
            str(port),
            "--log-level",
            "warning",
            *args,
        ]
    )
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            argv, cwd=REPO, env=_env(home, **env), stdout=fh, stderr=subprocess.STDOUT
        )
    server = Server(proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{server.url}/api/v1/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"server did not start:\n{log.read_text()}")


def _stop(server: Server) -> None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(30)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait(10)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        _stop(server)


def _split_zip(extra: int = 0) -> bytes:
    """ImageFolder split: one planted corpus photo, fresh photos, one corrupt file."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("test/cat/planted.jpg", _jpeg(PLANTED))
        for i in range(3 + extra):
            zf.writestr(f"test/dog/fresh{i:03d}.jpg", _jpeg(1000 + i))
        zf.writestr("test/dog/broken.jpg", _jpeg(2000)[:300])
    return out.getvalue()


# The tiny random model puts every photo at cosine > 0.9 of every other, so the embedding tiers
# run with cosine thresholds only a true copy reaches; the hash tiers keep their defaults.
STRICT_COSINE = json.dumps(
    {"near_cosine": 0.9999, "semantic_cosine": 0.9999, "candidate_cosine": 0.9999}
)


def _submit(client: httpx.Client, archive: bytes) -> int:
    response = client.post(
        "/api/v1/audits",
        files={"split": ("split.zip", archive, "application/zip")},
        data={"corpus": "web", "name": "e2e", "thresholds": STRICT_COSINE},
    )
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


def _wait(
    client: httpx.Client, audit_id: int, until: set[str], timeout: float = 300
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        audit: dict[str, Any] = client.get(f"/api/v1/audits/{audit_id}").json()
        if audit["status"] in until or time.monotonic() > deadline:
            return audit
        time.sleep(0.2)


def _check_report(report: dict[str, Any]) -> None:
    items = {item["key"]: item for item in report["items"]}
    planted = items["cat/planted.jpg"]
    assert planted["verdict"] == "exact" and planted["label"] == "cat"
    exact = [m for m in planted["matches"] if m["kind"] == "exact"]
    assert len(exact) == 1 and exact[0]["corpus_key"] == f"img{PLANTED:03d}.jpg"
    fresh = {
        k: [(m["kind"], m["cosine"], m["hamming"]) for m in item["matches"]]
        for k, item in items.items()
        if k.startswith("dog/fresh")
    }
    assert all(not matches for matches in fresh.values()), fresh
    assert [f["key"] for f in report["failed"]] == ["dog/broken.jpg"]
    ids = [m["id"] for item in report["items"] for m in item["matches"]]
    assert len(ids) == len(set(ids))
    assert report["summary"]["by_kind"]["exact"] == 1


def test_upload_poll_and_fetch_every_report_format(
    indexed_home: Path, tmp_path: Path, servers: list[Server]
) -> None:
    server = _start(indexed_home, tmp_path / "server.log", SPLITAUDIT_MAX_UPLOAD_MB="0.5")
    servers.append(server)
    with server.client() as client:
        audit_id = _submit(client, _split_zip())
        audit = _wait(client, audit_id, {"done", "failed"})
        assert audit["status"] == "done", audit
        report = client.get(f"/api/v1/audits/{audit_id}/report").json()
        _check_report(report)
        as_csv = client.get(f"/api/v1/audits/{audit_id}/report", params={"format": "csv"})
        as_junit = client.get(f"/api/v1/audits/{audit_id}/report", params={"format": "junit"})
        as_md = client.get(f"/api/v1/audits/{audit_id}/report", params={"format": "md"})
        match_id = next(
            m["id"] for i in report["items"] for m in i["matches"] if m["kind"] == "exact"
        )
        review = client.put(
            f"/api/v1/matches/{match_id}/review", json={"verdict": "duplicate", "note": "planted"}
        )
        planted_item = next(i for i in report["items"] if i["key"] == "cat/planted.jpg")
        thumb = client.get(
            f"/api/v1/split-items/{planted_item['split_item_id']}/thumbnail", params={"size": 64}
        )
        corpus_thumb = client.get(
            f"/api/v1/items/{planted_item['matches'][0]['corpus_item_id']}/thumbnail"
        )
        too_big = client.post(
            "/api/v1/audits",
            files={"split": ("big.zip", b"\0" * (1024 * 1024))},
            data={"corpus": "web"},
        )
    assert as_csv.status_code == 200 and "cat/planted.jpg" in as_csv.text
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert ET.fromstring(as_junit.content) is not None and "planted" in as_junit.text
    assert as_md.headers["content-type"].startswith("text/markdown") and "planted" in as_md.text
    assert review.status_code == 200 and review.json()["reviewer"] == "anonymous"
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
    assert corpus_thumb.status_code == 200 and "etag" in corpus_thumb.headers
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "upload_too_large"
    assert len(list((indexed_home / "splits").iterdir())) == 1  # only the accepted upload


def test_killed_server_resumes_the_audit_after_restart(
    indexed_home: Path, tmp_path: Path, servers: list[Server]
) -> None:
    log = tmp_path / "server.log"
    slow = _start(
        indexed_home, log, command=SLOW_SERVE, SLOW_JOB_DELAY_S="1.0", SPLITAUDIT_JOB_LEASE_S="2"
    )
    servers.append(slow)
    with slow.client() as client:
        audit_id = _submit(client, _split_zip(extra=4))
        running = _wait(client, audit_id, {"running", "done", "failed"}, timeout=120)
        assert running["status"] == "running", (
            running
        )  # the slow handler keeps it running for seconds
    slow.proc.send_signal(signal.SIGKILL)
    slow.proc.wait(30)

    restarted = _start(indexed_home, log, SPLITAUDIT_JOB_LEASE_S="2")
    servers.append(restarted)
    with restarted.client() as client:
        audit = _wait(client, audit_id, {"done", "failed"})
        assert audit["status"] == "done", (audit, log.read_text()[-3000:])
        assert audit["attempts"] == 2
        _check_report(client.get(f"/api/v1/audits/{audit_id}/report").json())
        job = client.get(f"/api/v1/jobs/{audit['job_id']}").json()
    assert job["status"] == "done" and job["error"] is None
    assert json.loads(json.dumps(job))["attempts"] == 2


@pytest.mark.postgres
def test_api_and_two_worker_processes_on_postgres(
    tmp_path: Path, tiny_model_spec: str, pg_url: str, servers: list[Server]
) -> None:
    """The compose deployment without Docker: `serve --no-worker` + two `splitaudit worker` on PostgreSQL."""
    db = {"SPLITAUDIT_DATABASE_URL": pg_url}
    home = _index(tmp_path, tiny_model_spec, **db)
    log = tmp_path / "server.log"
    server = _start(home, log, "--no-worker", **db)
    servers.append(server)
    workers = []
    try:
        for n in range(2):
            with open(tmp_path / f"worker{n}.log", "wb") as fh:
                workers.append(
                    subprocess.Popen(
                        [SPLITAUDIT, "worker", "--home", str(home), "--poll", "0.2"],
                        env=_env(home, **db),
                        stdout=fh,
                        stderr=subprocess.STDOUT,
                    )
                )
        with server.client() as client:
            assert client.get("/api/v1/health").json()["worker"] == "off"
            audit_ids = [_submit(client, _split_zip(extra=n)) for n in range(4)]
            audits = [_wait(client, audit_id, {"done", "failed"}) for audit_id in audit_ids]
            assert [a["status"] for a in audits] == ["done"] * 4, audits
            assert [a["attempts"] for a in audits] == [1] * 4  # never claimed twice
            for audit_id in audit_ids:
                _check_report(client.get(f"/api/v1/audits/{audit_id}/report").json())
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert [proc.returncode for proc in workers] == [0, 0]
