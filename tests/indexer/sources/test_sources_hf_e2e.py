"""End to end: index Hugging Face datasets (hf:// from a hub cache + save_to_disk), audit a Parquet split
(CLI and POST /audits with a server path), thumbnails of Parquet- and Arrow-backed items through the API."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import photo
from helpers.app_home import app_client
from helpers.hf_layout import HFRows, jpeg, write_hub_cache, write_parquet, write_save_to_disk

from splitaudit.indexer.audit.service import run_audit
from splitaudit.indexer.workspace import Workspace

pytestmark = pytest.mark.slow

SPLITAUDIT = str(Path(sys.executable).parent / "splitaudit")
SIZE = (160, 120)
TEST_NAMES = ("cat", "dog", "ship")


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), OMP_NUM_THREADS="1")
    return env


def _run(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SPLITAUDIT, *args], env=_env(cache), capture_output=True, text=True, timeout=300
    )


def _corpora(tmp_path: Path) -> tuple[Path, Path]:
    """A hub cache with acme/web (Parquet, captions) and a save_to_disk folder; returns both."""
    web = HFRows(
        images=[jpeg(photo(100 + i, SIZE)) for i in range(6)],
        labels=[0] * 6,
        captions=["a tabby cat asleep on a sofa"] + [f"landscape number {i}" for i in range(1, 6)],
        names=("web",),
    )
    parquet = write_parquet(tmp_path / "files" / "web.parquet", web, row_group_size=2)
    cache = tmp_path / "hub"
    write_hub_cache(cache, "acme/web", {"data/train-00000-of-00001.parquet": parquet})
    saved = HFRows(
        images=[jpeg(photo(200 + i, SIZE)) for i in range(4)],
        labels=[0] * 4,
        captions=[f"street scene {i}" for i in range(4)],
        names=("street",),
    )
    return cache, write_save_to_disk(tmp_path / "saved", saved, batch_rows=2)


def _split(tmp_path: Path) -> Path:
    """The test split: an exact copy (row 0), a downscaled re-encode (row 1), a clean image (row 2)."""
    small = photo(201, SIZE).resize((80, 60))
    rows = HFRows(
        images=[jpeg(photo(100, SIZE)), jpeg(small, quality=80), jpeg(photo(300, SIZE))],
        labels=[0, 1, 2],
        captions=["kitty", "a dog in the park", "open water"],
        names=TEST_NAMES,
    )
    root = tmp_path / "split"
    write_parquet(root / "data" / "test-00000-of-00001.parquet", rows, row_group_size=2)
    return root


def _by_key(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["key"]: item for item in report["items"]}


def _kinds(item: dict[str, Any]) -> set[str]:
    return {m["kind"] for m in item["matches"]}


def test_index_hub_and_saved_datasets_then_audit_a_parquet_split(tmp_path: Path) -> None:
    cache, saved = _corpora(tmp_path)
    split = _split(tmp_path)
    home = tmp_path / "home"

    indexed = _run(
        [
            "index",
            "hf://datasets/acme/web",
            str(saved),
            "--corpus",
            "web",
            "--home",
            str(home),
            "--no-embed",
        ],
        cache,
    )
    assert indexed.returncode == 0, indexed.stderr
    audited = _run(
        [
            "audit",
            str(split),
            "--corpus",
            "web",
            "--home",
            str(home),
            "--fail-on",
            "exact,near",
            "--json",
            str(tmp_path / "report.json"),
        ],
        cache,
    )

    assert audited.returncode == 1, audited.stderr  # planted copies fail the gate
    report = json.loads((tmp_path / "report.json").read_text())
    items = _by_key(report)
    exact = items["data/test-00000-of-00001.parquet#0"]
    near = items["data/test-00000-of-00001.parquet#1"]
    clean = items["data/test-00000-of-00001.parquet#2"]
    assert [exact["label"], near["label"], clean["label"]] == [
        "cat",
        "dog",
        "ship",
    ]  # ClassLabel names
    assert "exact" in _kinds(exact) and "near" in _kinds(near)
    assert clean["verdict"] == "clean"
    copy = next(m for m in exact["matches"] if m["kind"] == "exact")
    assert copy["corpus_key"] == "data/train-00000-of-00001.parquet#0"
    assert copy["uri"].endswith("train-00000-of-00001.parquet#row_group=0&row=0&column=image")
    near_match = next(m for m in near["matches"] if m["kind"] == "near")
    assert near_match["corpus_key"] == "data-00000-of-00001.arrow#1"
    # The corpus copy's caption names the test label: label-leak evidence from the caption.
    leak = next(m for m in exact["matches"] if m["kind"] == "label_leak")
    assert "caption" in json.dumps(leak["evidence"]) and "cat" in json.dumps(leak["evidence"])
    # The split's own caption gives "dog" away.
    assert "label_leak" in _kinds(near)

    with app_client(home) as client:
        split_thumb = client.get(
            f"/api/v1/split-items/{exact['split_item_id']}/thumbnail", params={"size": 64}
        )
        parquet_thumb = client.get(
            f"/api/v1/items/{copy['corpus_item_id']}/thumbnail", params={"size": 64}
        )
        arrow_thumb = client.get(
            f"/api/v1/items/{near_match['corpus_item_id']}/thumbnail", params={"size": 64}
        )
    for response in (split_thumb, parquet_thumb, arrow_thumb):
        assert response.status_code == 200, response.text
        assert (
            response.headers["content-type"] == "image/jpeg" and response.content[:2] == b"\xff\xd8"
        )


def test_post_audits_with_a_server_side_parquet_folder(tmp_path: Path) -> None:
    cache, saved = _corpora(tmp_path)
    split = _split(tmp_path)
    home = tmp_path / "home"
    indexed = _run(
        ["index", str(saved), "--corpus", "web", "--home", str(home), "--no-embed"], cache
    )
    assert indexed.returncode == 0, indexed.stderr

    with app_client(home, source_roots=[tmp_path / "elsewhere"]) as client:
        refused = client.post("/api/v1/audits", json={"folder": str(split), "corpus": ["web"]})
    with app_client(home, source_roots=[tmp_path]) as client:
        accepted = client.post("/api/v1/audits", json={"folder": str(split), "corpus": ["web"]})
        assert accepted.status_code == 202, accepted.text
        one_file = split / "data" / "test-00000-of-00001.parquet"
        packed = io.BytesIO()
        with zipfile.ZipFile(packed, "w") as zf:
            zf.write(one_file, "data/test-00000-of-00001.parquet")
        uploaded = client.post(
            "/api/v1/audits",
            files={"split": ("split.zip", packed.getvalue())},
            data={"corpus": "web"},
        )
        as_manifest = client.post(
            "/api/v1/audits", json={"manifest": str(one_file), "corpus": ["web"]}
        )
        ws = Workspace.open(home)
        try:
            run_audit(ws, accepted.json()["id"])
        finally:
            ws.close()
        report = client.get(f"/api/v1/audits/{accepted.json()['id']}/report").json()
        near = _by_key(report)["data/test-00000-of-00001.parquet#1"]
        thumb = client.get(
            f"/api/v1/split-items/{near['split_item_id']}/thumbnail", params={"size": 32}
        )

    assert refused.status_code == 403 and refused.json()["error"]["code"] == "path_not_allowed"
    assert uploaded.status_code == 202, uploaded.text  # a zipped dataset folder (audit --server)
    assert as_manifest.status_code == 202, as_manifest.text  # one Parquet file of a dataset
    assert near["label"] == "dog" and "near" in _kinds(near)
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
