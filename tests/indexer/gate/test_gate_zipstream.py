"""The on-the-fly zip of a split folder: complete, hidden files skipped, readable by the upload unpacker."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from splitaudit.indexer.gate.zipstream import ZipStream, folder_files
from splitaudit.indexer.sources.archive import extract_archive


def make_tree(root: Path) -> Path:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "deep.jpg").write_bytes(
        os.urandom(3 * 1024 * 1024 + 17)
    )  # spans several chunks
    (root / "a" / "one.png").write_bytes(b"\x89PNG small")
    (root / "labels.csv").write_text("key,label\na/one.png,x\n")
    (root / ".hidden.jpg").write_bytes(b"no")
    (root / ".cache").mkdir()
    (root / ".cache" / "x.jpg").write_bytes(b"no")
    return root


def read_all(stream: io.RawIOBase, size: int) -> bytes:
    out = bytearray()
    while chunk := stream.read(size):
        out += chunk
    return bytes(out)


def test_folder_files_sorted_and_hidden_skipped(tmp_path: Path) -> None:
    files = folder_files(make_tree(tmp_path / "s"))
    assert [f.arcname for f in files] == ["labels.csv", "a/one.png", "a/b/deep.jpg"]
    assert files[2].size == 3 * 1024 * 1024 + 17


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlinked_folders_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.jpg").write_bytes(b"x")
    root = tmp_path / "s"
    root.mkdir()
    (root / "in.jpg").write_bytes(b"y")
    (root / "link").symlink_to(outside, target_is_directory=True)
    assert [f.arcname for f in folder_files(root)] == ["in.jpg"]


def test_zip_round_trips_and_reports_progress(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "s")
    files = folder_files(root)
    seen: list[int] = []
    data = read_all(ZipStream(files, on_read=seen.append), 65536)
    assert sum(seen) == sum(f.size for f in files)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
        assert zf.read("a/b/deep.jpg") == (root / "a" / "b" / "deep.jpg").read_bytes()
        assert (
            zf.getinfo("a/b/deep.jpg").compress_type == zipfile.ZIP_STORED
        )  # images are not recompressed
        assert zf.getinfo("labels.csv").compress_type == zipfile.ZIP_DEFLATED


def test_upload_unpacker_accepts_the_streamed_zip(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "s")
    archive = tmp_path / "split.zip"
    archive.write_bytes(read_all(ZipStream(folder_files(root)), 1000))
    out = extract_archive(archive, tmp_path / "unpacked")
    assert (out / "a" / "one.png").read_bytes() == b"\x89PNG small"
    assert (out / "a" / "b" / "deep.jpg").stat().st_size == 3 * 1024 * 1024 + 17
