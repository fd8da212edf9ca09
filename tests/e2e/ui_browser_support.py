"""Helpers for the browser tests: a real demo index, the app in a uvicorn subprocess, headless Chromium."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


def require_chromium() -> None:
    """Skip the test, saying why, when Debian's Chromium or Playwright is missing."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` (never `playwright install`)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"playwright for Python is not installed: {exc}")


@dataclass(frozen=True)
class DemoHome:
    """A home with corpus ``demo`` indexed (hashes only) and, when asked, one finished audit."""

    home: Path
    data: Path
    audit_id: int | None
    planted: dict[str, str]


def build_demo_home(root: Path, *, audit: bool = True) -> DemoHome:
    """Index the demo corpus with ``embedder=None`` (fast) and optionally run an audit of the demo split."""
    from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
    from splitaudit.indexer.demo import write_demo
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.folder import FolderSource
    from splitaudit.indexer.sources.open import open_split
    from splitaudit.indexer.workspace import Workspace

    demo = write_demo(root / "data")
    ws = Workspace.open(root / "home")
    try:
        index_sources(ws, "demo", [FolderSource(demo.corpus)], embedder=None)
        audit_id = None
        if audit:
            split_id = create_split(ws, open_split(str(demo.split)), name="demo-split")
            audit_id = create_audit(ws, split_id=split_id, corpora=["demo"])
            run_audit(ws, audit_id)
    finally:
        ws.close()
    return DemoHome(
        home=root / "home", data=root / "data", audit_id=audit_id, planted=dict(demo.planted)
    )


def zip_folder(folder: Path, dest: Path) -> Path:
    """``folder`` packed as a zip (members relative to it)."""
    with zipfile.ZipFile(dest, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    return dest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """The app running under uvicorn in a subprocess."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def client(self, token: str | None = None) -> httpx.Client:
        """An HTTP client for the REST API."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, timeout=30, headers=headers)


@contextmanager
def serve(
    home: Path, log: Path, factory: str = "splitaudit.app.main:create_app", **env: str
) -> Iterator[Server]:
    """Run ``uvicorn --factory FACTORY`` over ``home`` until the block ends.

    ``helpers.slow_jobs:create_slow_app`` gives a server whose jobs are slow enough to watch.
    """
    port = _free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    environ.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", SPLITAUDIT_HOME=str(home), **env)
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                factory,
                "--app-dir",
                str(REPO / "tests"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=environ,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    server = Server(proc, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{server.url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@contextmanager
def browser_page(width: int = 1280, height: int = 800) -> Iterator[Any]:
    """A Playwright page in Debian's headless Chromium; page errors fail the test."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(20_000)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page
        finally:
            browser.close()
    assert not errors, f"JavaScript errors: {errors}"


def save_screenshot(page: Any, name: str) -> Path:
    """A screenshot under ``test-artifacts/`` (git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=False)
    return path


def remove_tree(path: Path) -> None:
    """Delete a folder if it exists."""
    shutil.rmtree(path, ignore_errors=True)


def wait_for_js(page: Any, expression: str, timeout: float = 30_000) -> None:
    """Wait until ``expression`` (a JS expression or ``() => ...`` function) is truthy in ``page``.

    Playwright's ``wait_for_function`` polls with ``eval`` inside the page, which the UI's strict
    Content-Security-Policy (no ``unsafe-eval``) refuses; ``page.evaluate`` runs through the
    DevTools protocol, outside the page's CSP, so poll with it from here.
    """
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} ms waiting for: {expression}")
        time.sleep(0.02)
