"""Resources an upload or an image may take: oversized files refused before reading, archives
capped at a multiple of their size, finished uploads cleaned (review's images kept), and no
Python object reprs in reasons."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from apptest_support import api_client, assert_error, new_home, png_bytes, workspace, zip_bytes
from sqlalchemy import select

from splitaudit.app.submit import UNPACK_FLOOR, unpack_limit
from splitaudit.indexer.db.models import Audit, Split
from splitaudit.indexer.features.decode import scrub_reprs
from splitaudit.indexer.jobs.worker import Worker
from splitaudit.indexer.pipeline.extract import extract_record
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.runtime.handlers import default_handlers
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.record import Locator, Record


def test_a_huge_sparse_file_is_refused_by_its_size_without_being_read(tmp_path: Path) -> None:
    big = tmp_path / "big.jpg"
    with open(big, "wb") as fh:
        fh.truncate(2 * 2**30)  # 2 GiB, sparse: nothing on disk
    record = Record(key="big.jpg", source="s", shard="", locator=Locator("file", path=str(big)))
    out = extract_record(record, keep_image=False)
    assert out.features is None and out.error is not None
    assert "2147483648 bytes" in out.error and "refused without reading" in out.error


def test_reasons_never_carry_object_reprs() -> None:
    text = "cannot identify image file <_io.BytesIO object at 0x7f3a2b1c0>"
    assert scrub_reprs(text) == "cannot identify image file the image"
    record = Record(
        key="x.png", source="s", shard="", locator=Locator("none"), data=b"\x89PNG\r\n\x1a\n junk"
    )
    out = extract_record(record, keep_image=False)
    assert out.error is not None and "object at 0x" not in out.error


def test_the_unpacked_size_is_capped_at_a_multiple_of_the_upload(tmp_path: Path) -> None:
    assert unpack_limit(1000, max_unpacked=2**40, max_ratio=100) == UNPACK_FLOOR
    assert unpack_limit(10 * 2**20, max_unpacked=2**40, max_ratio=100) == 1000 * 2**20
    assert unpack_limit(10 * 2**20, max_unpacked=2**20, max_ratio=100) == 2**20
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.png", png_bytes(1))
        zf.writestr("zeros.bmp", bytes(UNPACK_FLOOR + 2**20))  # ~70 MB from ~70 KB
    home = new_home(tmp_path)
    with api_client(home) as client:
        client.post("/api/v1/corpora", json={"name": "web", "no_embed": True})
        refused = client.post(
            "/api/v1/audits",
            files={"split": ("bomb.zip", bomb.getvalue(), "application/zip")},
            data={"corpus": "web"},
        )
    error = assert_error(refused, 422, "bad_input", contains="unpack")
    assert "bomb.zip" in error["message"] and str(home) not in error["message"]
    assert not list((home / "splits").glob("*/split/*"))


def test_a_finished_upload_keeps_only_the_images_review_shows(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "c1.png").write_bytes(png_bytes(1))
    home = new_home(tmp_path)
    ws = workspace(home)
    index_sources(ws, "web", [FolderSource(corpus)], embedder=None)
    with api_client(home) as client:
        accepted = client.post(
            "/api/v1/audits",
            files={
                "split": (
                    "s.zip",
                    zip_bytes({"leak.png": png_bytes(1), "clean.png": png_bytes(7)}),
                    "application/zip",
                )
            },
            data={"corpus": "web"},
        )
        assert accepted.status_code == 202, accepted.text
    try:
        assert Worker(ws, default_handlers(), poll_s=0.01).run_once()
        with ws.sessions() as s:
            audit = s.scalars(select(Audit)).one()
            root = Path(s.get_one(Split, audit.split_id).root)
            assert audit.summary["flagged"] == 1
    finally:
        ws.close()
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == ["leak.png"]
