"""Archive member names that are not UTF-8: read (CP437 / escaped key), never a crash or a failed job."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import photo

from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.reporting.report import audit_report
from splitaudit.indexer.sources.archive import ArchiveSource, extract_archive
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.member_names import escape_bytes_name, escape_undecodable
from splitaudit.indexer.sources.open import open_split
from splitaudit.indexer.workspace import Workspace


def _png(seed: int) -> bytes:
    out = io.BytesIO()
    photo(seed, (64, 48)).save(out, format="PNG")
    return out.getvalue()


def zip_with_raw_names(path: Path, names: dict[bytes, bytes], *, utf8_flag: bool) -> Path:
    """A zip whose member names are exactly the given bytes (placeholder names patched in place)."""
    placeholders = {}
    with zipfile.ZipFile(path, "w") as zf:
        for n, (raw, data) in enumerate(names.items()):
            # zipfile sets the UTF-8 flag itself for a non-ASCII name ("é" is two bytes in UTF-8)
            lead = "é" if utf8_flag else "q"
            fake = (lead + chr(ord("a") + n) * (len(raw) - len(lead.encode()))).encode()
            zf.writestr(fake.decode(), data)
            placeholders[fake] = raw
    blob = path.read_bytes()
    for fake, raw in placeholders.items():
        assert blob.count(fake) == 2  # local header + central directory
        blob = blob.replace(fake, raw)
    path.write_bytes(blob)
    return path


def tar_with_raw_names(path: Path, names: dict[bytes, bytes]) -> Path:
    with tarfile.open(path, "w", encoding="utf-8", errors="surrogateescape") as tf:
        for raw, data in names.items():
            info = tarfile.TarInfo(raw.decode("utf-8", "surrogateescape"))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_escape_is_lossless_and_leaves_valid_names_alone() -> None:
    assert escape_bytes_name("café.png".encode()) == "café.png"
    assert escape_bytes_name(b"caf\xe9 100%.png") == "caf%E9 100%25.png"
    assert escape_bytes_name(b"a%E9.png") == "a%E9.png"  # valid UTF-8: untouched
    assert escape_undecodable("x\udcff") == "x%FF"
    assert escape_bytes_name(b"caf\xe9.png") != escape_bytes_name(
        b"caf%E9.png".replace(b"%", b"%25")
    )


def test_zip_flagged_utf8_with_invalid_names_is_extracted_with_escaped_names(
    tmp_path: Path,
) -> None:
    z = zip_with_raw_names(
        tmp_path / "s.zip",
        {b"cat/caf\xe9\xff.png": _png(1), b"cat/ok.png": _png(2)},
        utf8_flag=True,
    )
    with pytest.raises(UnicodeDecodeError):
        zipfile.ZipFile(z)  # what used to reach the API as a 500
    root = extract_archive(z, tmp_path / "out")
    names = sorted(p.relative_to(tmp_path / "out").as_posix() for p in root.rglob("*.png"))
    assert names == ["cat/caf%E9%FF.png", "cat/ok.png"]
    assert (root / "caf%E9%FF.png").read_bytes() == _png(1)


def test_zip_flagged_utf8_with_invalid_names_reads_in_place(tmp_path: Path) -> None:
    z = zip_with_raw_names(tmp_path / "s.zip", {b"caf\xe9.png": _png(1)}, utf8_flag=True)
    source = ArchiveSource(z)
    records = [r for shard in source.shards() for r in source.records(shard)]
    assert [r.key for r in records] == ["caf%E9.png"]
    assert records[0].read_bytes() == _png(1)


def test_zip_without_utf8_flag_is_cp437(tmp_path: Path) -> None:
    z = zip_with_raw_names(tmp_path / "s.zip", {b"caf\x82.png": _png(1)}, utf8_flag=False)
    root = extract_archive(z, tmp_path / "out")
    assert [p.name for p in root.iterdir()] == ["café.png"]


def test_tar_latin1_member_name_is_extracted_with_an_escaped_name(tmp_path: Path) -> None:
    t = tar_with_raw_names(tmp_path / "s.tar", {b"caf\xe9.png": _png(1)})
    root = extract_archive(t, tmp_path / "out")
    assert [p.name for p in root.iterdir()] == ["caf%E9.png"]
    in_place = ArchiveSource(t)
    assert [r.key for s in in_place.shards() for r in in_place.records(s)] == ["caf%E9.png"]


@pytest.mark.skipif(os.uname().sysname == "Darwin", reason="macOS refuses non-UTF-8 file names")
def test_audit_of_non_utf8_file_names_finishes_with_escaped_keys(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    photo(1, (64, 48)).save(corpus / "c1.png")
    split = tmp_path / "split"
    split.mkdir()
    with open(os.path.join(os.fsencode(split), b"caf\xe9.png"), "wb") as fh:
        fh.write(_png(1))
    ws = Workspace.open(tmp_path / "home")
    try:
        index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
        audit_id = create_audit(
            ws, split_id=create_split(ws, open_split(split), name="s"), corpora=["c"]
        )
        run_audit(ws, audit_id)  # the ingest flush used to fail: "surrogates not allowed"
        with ws.sessions() as s:
            report = audit_report(s, audit_id)
    finally:
        ws.close()
    assert report["status"] == "done"
    assert [(i["key"], i["verdict"]) for i in report["items"]] == [("caf%E9.png", "exact")]


@pytest.mark.skipif(os.uname().sysname == "Darwin", reason="macOS refuses non-UTF-8 file names")
def test_indexing_non_utf8_file_names_stores_escaped_keys(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with open(os.path.join(os.fsencode(corpus), b"caf\xe9.png"), "wb") as fh:
        fh.write(_png(1))
    (corpus / "broken\udcff.png").write_bytes(b"")  # an empty file whose name is byte 0xFF
    ws = Workspace.open(tmp_path / "home")
    try:
        summary = index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    finally:
        ws.close()
    assert (summary.indexed, summary.failed) == (1, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain/ascii.jpg", False),
        ("café/ünïcode-名前.jpg", False),
        (b"caf\xe9.jpg".decode("utf-8", "surrogateescape"), True),
        ("lone \ud800 high surrogate", False),  # not an escaped byte: left alone
        ("", False),
    ],
)
def test_has_surrogates_fast_paths_agree_with_the_definition(text: str, expected: bool) -> None:
    from splitaudit.indexer.sources.member_names import has_surrogates

    assert has_surrogates(text) is expected
    assert expected == any("\udc80" <= ch <= "\udcff" for ch in text)
