"""The wheel installs one import name, ``splitaudit``, that works beside a user's own ``app``/``indexer``."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"splitaudit.indexer": ROOT / "indexer", "splitaudit.app": ROOT / "app"}


def _declared_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    packages: list[str] = config["tool"]["setuptools"]["packages"]
    return packages


def test_every_package_folder_is_declared() -> None:
    found = {"splitaudit"}
    for name, folder in FOLDERS.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            if rel.parts[:1] == ("public",):
                continue  # installed as the `splitaudit` package itself
            found.add(".".join((name, *rel.parts)))
    assert sorted(found) == sorted(_declared_packages())


def test_no_bare_app_or_indexer_imports() -> None:
    bare = []
    for folder in (ROOT / "indexer", ROOT / "app", ROOT / "migrations", ROOT / "bench"):
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                bare += [
                    f"{path.relative_to(ROOT)}: {m}"
                    for m in names
                    if m.split(".")[0] in {"app", "indexer"}
                ]
    assert bare == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_wheel_in_fresh_venv_beside_foreign_app_and_indexer(tmp_path: Path) -> None:
    """Build the wheel, install it (no deps: they come from this venv) into a fresh venv, and run
    the CLI, the server and the Python API from a directory holding its own ``app``/``indexer``."""
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("splitaudit-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert zf.read(top_level).decode().split() == ["splitaudit"]
    code_roots = {n.split("/")[0] for n in names if n.endswith(".py")}
    assert {r for r in code_roots if not r.endswith(".data")} == {"splitaudit"}  # .data: migrations
    assert "splitaudit/app/templates/base.html" in names or any(
        n.startswith("splitaudit/app/templates/") for n in names
    )

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(purelib)  # a wheel is a zip laid out for site-packages
    # dependencies from this venv, after the fresh venv's own site-packages
    (Path(purelib) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    user_repo = tmp_path / "training-repo"
    for name in ("app", "indexer"):
        (user_repo / name).mkdir(parents=True)
        (user_repo / name / "__init__.py").write_text(f"raise ImportError('the user {name}')\n")
    env = {**os.environ, "PYTHONPATH": str(user_repo), "SPLITAUDIT_HOME": str(tmp_path / "home")}
    env.pop("SPLITAUDIT_DATABASE_URL", None)

    def run(*args: str) -> str:
        done = subprocess.run(
            [py, *args], cwd=user_repo, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "splitaudit" in run("-m", "splitaudit.indexer.cli.main", "--version")
    cli = str(venv / "bin" / "splitaudit")
    (venv / "bin" / "splitaudit").write_text(
        f"#!{py}\nfrom splitaudit.indexer.cli.main import main\nmain()\n"
    )
    os.chmod(cli, 0o755)
    assert "splitaudit" in run(cli, "--version")
    api = run("-c", "import splitaudit, sys; print(splitaudit.__version__, splitaudit.__file__)")
    assert purelib in api

    port = _free_port()
    server = subprocess.Popen(
        [cli, "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=user_repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.3)
        assert health.status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
