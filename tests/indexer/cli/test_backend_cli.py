"""``--backend`` on the CLI: an uninstalled backend exits 2; every backend gives the same audit verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import photo

from splitaudit.indexer.demo import write_demo

# The CLI with `openvino` made unimportable, as on a machine where it is not installed.
_WITHOUT_OPENVINO = (
    "import sys; sys.modules['openvino'] = None; from splitaudit.indexer.cli.main import main; "
    "sys.argv[0] = 'splitaudit'; main()"
)


def run(
    *args: str | Path, cwd: Path, block_openvino: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess (optionally without OpenVINO)."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "SPLITAUDIT_TORCH_THREADS": "1"}
    for inherited in (
        "GITHUB_STEP_SUMMARY",
        "SPLITAUDIT_HOME",
        "SPLITAUDIT_DATABASE_URL",
        "SPLITAUDIT_BACKEND",
    ):
        full_env.pop(inherited, None)
    full_env.update(env or {})
    head = ["-c", _WITHOUT_OPENVINO] if block_openvino else ["-m", "splitaudit.indexer.cli.main"]
    return subprocess.run(
        [sys.executable, *head, *map(str, args)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus and split (real photos, planted exact and near copies)."""
    root = tmp_path_factory.mktemp("demo")
    (root / ".git").mkdir()  # no policy file found above it
    write_demo(root, synthetic=12)
    return root


@pytest.mark.parametrize("command", ["index", "audit", "serve", "worker"])
def test_an_uninstalled_backend_exits_2_naming_the_installed_ones(
    command: str, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    photo(0).save(src / "a.jpg")
    args: list[str | Path] = {
        "index": ["index", src, "--corpus", "c", "--model", "efficientnet-lite0"],
        "audit": ["audit", src, "--corpus", "c"],
        "serve": ["serve", "--port", "0"],
        "worker": ["worker"],
    }[command]
    (tmp_path / "home").mkdir()
    res = run(
        *args,
        "--home",
        tmp_path / "home",
        "--backend",
        "openvino",
        cwd=tmp_path,
        block_openvino=True,
    )
    assert res.returncode == 2, res.stderr
    assert "backend 'openvino' is not installed here (installed: onnxruntime, torch)" in res.stderr


def test_the_backend_can_come_from_the_environment(tmp_path: Path) -> None:
    photo(0).save(tmp_path / "a.jpg")
    res = run(
        "index",
        tmp_path,
        "--corpus",
        "c",
        "--home",
        tmp_path / "home",
        cwd=tmp_path,
        block_openvino=True,
        env={"SPLITAUDIT_BACKEND": "openvino"},
    )
    assert res.returncode == 2 and "installed: onnxruntime, torch" in res.stderr
    bad = run(
        "index", tmp_path, "--corpus", "c", cwd=tmp_path, env={"SPLITAUDIT_BACKEND": "tensorrt"}
    )
    assert bad.returncode == 2 and "tensorrt" in bad.stderr


def _audit(demo: Path, home: Path, *, index_backend: str, audit_backend: str) -> dict[str, Any]:
    if not (home / "splitaudit.db").exists():
        res = run(
            "index",
            demo / "corpus",
            "--corpus",
            "demo",
            "--home",
            home,
            "--model",
            "efficientnet-lite0",
            "--backend",
            index_backend,
            cwd=demo,
        )
        assert res.returncode == 0, res.stderr
    out = home.parent / f"report-{index_backend}-{audit_backend}.json"
    res = run(
        "audit",
        demo / "split",
        "--corpus",
        "demo",
        "--home",
        home,
        "--json",
        out,
        "--backend",
        audit_backend,
        cwd=demo,
    )
    assert res.returncode == 1, res.stderr  # the planted leaks fail the gate
    assert "refused" not in res.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@pytest.mark.slow
def test_every_backend_gives_the_same_audit_verdicts_on_the_demo_set(
    demo: Path, tmp_path: Path
) -> None:
    reports = {
        (index_backend, audit_backend): _audit(
            demo,
            tmp_path / f"home-{index_backend}",
            index_backend=index_backend,
            audit_backend=audit_backend,
        )
        for index_backend, audit_backend in [
            ("torch", "torch"),
            ("onnxruntime", "onnxruntime"),
            ("openvino", "openvino"),
            ("torch", "openvino"),
        ]
    }
    verdicts = {k: {it["key"]: it["verdict"] for it in r["items"]} for k, r in reports.items()}
    expected = {
        "astronaut/copy.jpg": "exact",
        "coffee/resized.jpg": "near",
        "cat/cropped.jpg": "near",
        "rocket/mirrored.png": "near",
        "photographer/fresh0.jpg": "clean",
        "coins/fresh1.jpg": "clean",
        "grass/fresh2.jpg": "clean",
        "moon/fresh3.jpg": "clean",
    }
    assert all(v == expected for v in verdicts.values()), verdicts
    assert {r["model"]["id"] for r in reports.values()} == {"efficientnet-lite0:imagenet"}
    assert all(r["model"]["semantic"] == "ok" for r in reports.values())
    assert (tmp_path / "home-openvino" / "exports" / "openvino").is_dir()
    assert not (tmp_path / "home-torch" / "exports" / "onnxruntime").exists()
