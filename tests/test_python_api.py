"""The Python API (``import splitaudit``): docs/python.md's examples run as written, plus the edges."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import splitaudit
from splitaudit.indexer.demo import synthetic_photo

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"
DOC_URL = "http://127.0.0.1:8000"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def _data(root: Path) -> None:
    """data/corpus: 10 photos + a resized copy of photo 3; data/test: 2 exact copies, 1 fresh photo."""
    corpus, test = root / "data" / "corpus", root / "data" / "test"
    corpus.mkdir(parents=True)
    test.mkdir(parents=True)
    for i in range(10):
        synthetic_photo(i, (160, 120)).save(corpus / f"photo{i}.png")
    synthetic_photo(3, (160, 120)).resize((120, 90)).save(corpus / "photo3_small.png")
    synthetic_photo(0, (160, 120)).save(test / "a.png")
    synthetic_photo(1, (160, 120)).save(test / "b.png")
    synthetic_photo(500, (160, 120)).save(test / "fresh.png")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(home: Path, cwd: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "splitaudit.indexer.cli",
            "serve",
            "--home",
            str(home),
            "--port",
            str(port),
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert server.poll() is None, "splitaudit serve exited"
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                return server, url
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    server.terminate()
    raise AssertionError("splitaudit serve did not answer")


def test_doc_has_examples_for_every_call() -> None:
    code = "\n".join(_blocks())
    for call in (
        "splitaudit.index(",
        "splitaudit.audit(",
        "splitaudit.dedup(",
        "splitaudit.Client(",
        ".to_pandas()",
    ):
        assert call in code


@pytest.mark.slow
def test_docs_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _data(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPLITAUDIT_HOME", raising=False)
    monkeypatch.delenv("SPLITAUDIT_DATABASE_URL", raising=False)
    namespace: dict[str, Any] = {"__name__": "docs_python"}
    server: subprocess.Popen[bytes] | None = None
    try:
        for block in _blocks():
            if "splitaudit.Client(" in block:
                server, url = _start_server(tmp_path / ".splitaudit", tmp_path)
                block = block.replace(DOC_URL, url)
            exec(compile(block, str(DOC), "exec"), namespace)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)

    result = namespace["result"]
    assert result.summary["by_kind"]["exact"] == 2
    assert not result.passed and result.exit_code == 1
    assert {item["key"] for item in result.flagged} == {"a.png", "b.png"}
    matches = namespace["matches"]
    assert set(matches.loc[matches["kind"] == "exact", "key"]) == {"a.png", "b.png"}
    assert set(matches.loc[matches["kind"] == "exact", "corpus_key"]) == {
        "photo0.png",
        "photo1.png",
    }
    dups = namespace["dups"]
    assert dups.drop_keys == ["photo3_small.png"]  # keep="largest" keeps the full-size original
    assert set(namespace["members"]["key"]) == {"photo3.png", "photo3_small.png"}
    remote = namespace["remote"]
    assert remote.summary["by_kind"]["exact"] == 2
    assert remote.exit_code == 1


def test_hash_only_flow_and_result_shapes(tmp_path: Path) -> None:
    _data(tmp_path)
    home = tmp_path / "home"
    summary = splitaudit.index(
        tmp_path / "data" / "corpus", corpus="c", home=home, embed=False, progress=False
    )
    assert summary.indexed == 11
    again = splitaudit.index(
        [tmp_path / "data" / "corpus"], corpus="c", home=home, embed=False, progress=False
    )
    assert again.indexed == 0

    result = splitaudit.audit(
        tmp_path / "data" / "test", corpus="c", home=home, progress=False, max_count=2
    )
    assert result.passed and result.exit_code == 0  # two flagged images are allowed
    assert result["summary"]["by_kind"]["exact"] == 2
    assert result.to_dict()["gate"]["status"] == "passed"
    frame = result.to_pandas()
    assert list(frame.columns)[:3] == ["key", "label", "verdict"]
    assert len(frame) >= 2
    strict = splitaudit.audit(
        tmp_path / "data" / "test", corpus="c", home=home, progress=False, fail_on="near"
    )
    assert strict.passed  # exact matches do not fail a near-only gate
    assert strict.gate.policy.fail_on == ("near",)

    dups = splitaudit.dedup(corpus="c", home=home, progress=False)
    assert dups.drop_keys == ["photo3_small.png"]
    assert [c["kept"] for c in dups.clusters] == ["photo3.png"]


def test_errors_are_splitaudit_errors(tmp_path: Path) -> None:
    _data(tmp_path)
    with pytest.raises(splitaudit.SplitauditError, match="no splitaudit index"):
        splitaudit.audit(
            tmp_path / "data" / "test", corpus="c", home=tmp_path / "nowhere", progress=False
        )
    home = tmp_path / "home"
    splitaudit.index(
        tmp_path / "data" / "corpus", corpus="c", home=home, embed=False, progress=False
    )
    with pytest.raises(splitaudit.SplitauditError, match="does not exist"):
        splitaudit.audit(tmp_path / "missing", corpus="c", home=home, progress=False)
    with pytest.raises(splitaudit.SplitauditError, match="corpus 'other' does not exist"):
        splitaudit.dedup(corpus="other", home=home, progress=False)
    with pytest.raises(splitaudit.SplitauditError, match="http"):
        splitaudit.Client("ftp://example.org")


def test_import_is_light() -> None:
    code = (
        "import sys, splitaudit\n"
        "heavy = [m for m in ('torch', 'open_clip', 'faiss', 'sqlalchemy', 'splitaudit.api') if m in sys.modules]\n"
        "print(heavy)\n"
        "splitaudit.audit\n"
        "print('torch' in sys.modules, 'splitaudit.api' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "False True"]
