"""A folder's files are never dropped silently, and non-UTF-8 names stay readable.

An image in a format splitaudit does not decode (SVG, HEIC, ...) becomes a record that fails
with the reason; a file name that is not UTF-8 is shown escaped and opened by its exact bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.audit.service import run_audit, submit_audit
from splitaudit.indexer.db.models import FailedItem, Item, SplitItem
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.record import Locator
from splitaudit.indexer.workspace import Workspace

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'


def test_unsupported_image_formats_are_listed_not_dropped(tmp_path: Path) -> None:
    folder = tmp_path / "split"
    folder.mkdir()
    photo(1, (64, 48)).save(folder / "a.png")
    (folder / "logo.svg").write_bytes(SVG)
    (folder / "photo.HEIC").write_bytes(b"\x00\x00\x00\x18ftypheic")
    (folder / "notes.txt").write_text("not an image at all")  # not an image: not a record
    source = FolderSource(folder)
    records = {r.key: r for shard in source.shards() for r in source.records(shard)}
    assert set(records) == {"a.png", "logo.svg", "photo.HEIC"}
    assert records["a.png"].error is None
    assert "unsupported image format (.svg)" in (records["logo.svg"].error or "")
    assert "unsupported image format (.heic)" in (records["photo.HEIC"].error or "")


def test_an_audit_reports_a_skipped_svg_as_unreadable(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    photo(1, (64, 48)).save(corpus / "c.png")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    split = tmp_path / "split"
    split.mkdir()
    photo(2, (64, 48)).save(split / "t.png")
    (split / "logo.svg").write_bytes(SVG)
    audit_id = submit_audit(ws, split_uri=str(split), name="s", corpora=["c"])
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        errors = dict(s.execute(select(SplitItem.key, SplitItem.error)).all())
    ws.close()
    assert errors["t.png"] is None
    assert "unsupported image format (.svg)" in (errors["logo.svg"] or "")


@pytest.mark.skipif(os.name != "posix", reason="non-UTF-8 names need a POSIX file system")
def test_a_non_utf8_file_name_is_indexed_escaped_and_read_back_by_its_bytes(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    raw = os.path.join(os.fsencode(folder), b"caf\xe9 100%.png")
    try:
        photo(3, (64, 48)).save(os.fsdecode(raw), format="PNG")
    except OSError as exc:  # a file system that insists on UTF-8
        pytest.skip(f"cannot create a non-UTF-8 name here: {exc}")
    ws = Workspace.open(tmp_path / "home")
    summary = index_sources(ws, "c", [FolderSource(folder)], embedder=None)
    with ws.sessions() as s:
        item = s.scalars(select(Item)).one()
        failed = s.scalars(select(FailedItem)).all()
    ws.close()
    assert summary.indexed == 1 and not failed
    assert item.key == "caf%E9 100%25.png"  # display form: escaped, JSON-safe
    assert item.locator["path"].endswith("caf%E9 100%25.png")
    data = Locator(**item.locator).read_bytes()  # opened by its exact bytes
    with open(raw, "rb") as fh:
        assert data == fh.read()


@pytest.mark.skipif(os.name != "posix", reason="non-UTF-8 names need a POSIX file system")
def test_the_thumbnail_of_a_non_utf8_name_is_served(tmp_path: Path) -> None:
    from helpers.app_home import app_client, new_home

    folder = tmp_path / "corpus"
    folder.mkdir()
    raw = os.path.join(os.fsencode(folder), b"\xff\xfe.png")
    try:
        photo(4, (64, 48)).save(os.fsdecode(raw), format="PNG")
    except OSError as exc:
        pytest.skip(f"cannot create a non-UTF-8 name here: {exc}")
    home = new_home(tmp_path)
    ws = Workspace.open(home)
    index_sources(ws, "c", [FolderSource(folder)], embedder=None)
    with ws.sessions() as s:
        item_id = s.scalars(select(Item.id)).one()
    ws.close()
    with app_client(home) as client:
        answer = client.get(f"/api/v1/items/{item_id}/thumbnail")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("image/")
