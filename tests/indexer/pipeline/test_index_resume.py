"""A real `splitaudit index` killed with SIGKILL mid-run resumes with no duplicate and no gap."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import photo

from splitaudit.indexer.pipeline.index import open_corpus_index
from splitaudit.indexer.workspace import Workspace

SPLITAUDIT = [sys.executable, "-m", "splitaudit.indexer.cli.main"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*SPLITAUDIT, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _db_items(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM item").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_sigkill_then_rerun_equals_clean_run(tmp_path: Path, tiny_model_spec: str) -> None:
    corpus = tmp_path / "corpus"
    for shard in ("s1", "s2"):
        (corpus / shard).mkdir(parents=True)
        for i in range(30):
            photo(i + (100 if shard == "s2" else 0), (64, 48)).save(corpus / shard / f"{i}.png")
    home = tmp_path / "home"
    env = dict(os.environ, SPLITAUDIT_TEST_BATCH_DELAY="0.3", HF_HUB_OFFLINE="1")
    args = [
        "index",
        str(corpus),
        "--corpus",
        "c",
        "--home",
        str(home),
        "--model",
        tiny_model_spec,
        "--batch-size",
        "4",
    ]
    proc = _run(args, env)
    deadline = time.time() + 120
    while _db_items(home / "splitaudit.db") < 12 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "indexing finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = _db_items(home / "splitaudit.db")
    assert 0 < partial < 60

    env.pop("SPLITAUDIT_TEST_BATCH_DELAY")
    done = subprocess.run(
        [*SPLITAUDIT, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"already present {partial}" in done.stdout

    clean_home = tmp_path / "clean"
    clean = subprocess.run(
        [*SPLITAUDIT, *args[:-6], "--home", str(clean_home), "--model", tiny_model_spec],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert clean.returncode == 0, clean.stderr

    def state(h: Path) -> tuple[list[str], int, int]:
        with sqlite3.connect(h / "splitaudit.db") as conn:
            keys = [r[0] for r in conn.execute("SELECT key FROM item ORDER BY key")]
            dup = conn.execute(
                "SELECT count(*) FROM (SELECT key, shard_id FROM item GROUP BY 1, 2 HAVING count(*) > 1)"
            ).fetchone()[0]
        ws = Workspace.open(h)
        idx = open_corpus_index(ws, "c")
        assert idx.floats is not None
        with sqlite3.connect(h / "splitaudit.db") as conn:
            db_ids = sorted(r[0] for r in conn.execute("SELECT id FROM item"))
        faiss_ids = sorted(int(idx.floats.index.id_map.at(i)) for i in range(idx.floats.count))
        assert faiss_ids == db_ids
        hash_ids = np.sort(
            np.array([idx.hashes.index.id_map.at(i) for i in range(idx.hashes.count)])
        )
        assert hash_ids.tolist() == db_ids
        ws.close()
        return keys, dup, idx.floats.count

    resumed, clean_state = state(home), state(clean_home)
    assert resumed == clean_state
    assert resumed[1] == 0 and resumed[2] == 60
