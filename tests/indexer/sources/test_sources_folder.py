"""FolderSource: keys, ImageFolder labels, sidecar captions, shards and fingerprints, error records."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.record import Record


def write_image(path: Path, seed: int = 0, fmt: str | None = None) -> bytes:
    """Write a tiny random image and return its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(path, format=fmt)
    return path.read_bytes()


def all_records(source: FolderSource) -> dict[str, Record]:
    return {r.key: r for shard in source.shards() for r in source.records(shard)}


def test_imagefolder_layout_gives_labels_and_posix_keys(tmp_path: Path) -> None:
    write_image(tmp_path / "cat" / "a.jpg", 1)
    write_image(tmp_path / "dog" / "b.png", 2)
    write_image(tmp_path / "dog" / "c.webp", 3, fmt="WEBP")
    src = FolderSource(tmp_path)
    records = all_records(src)
    assert src.is_imagefolder
    assert {k: r.label for k, r in records.items()} == {
        "cat/a.jpg": "cat",
        "dog/b.png": "dog",
        "dog/c.webp": "dog",
    }
    assert all(r.source == str(tmp_path.resolve()) for r in records.values())


def test_nested_folders_are_not_imagefolder(tmp_path: Path) -> None:
    write_image(tmp_path / "cat" / "a.jpg")
    write_image(tmp_path / "dog" / "deep" / "b.jpg")
    records = all_records(FolderSource(tmp_path))
    assert set(records) == {"cat/a.jpg", "dog/deep/b.jpg"}
    assert all(r.label is None for r in records.values())


def test_single_folder_is_a_container_not_a_class(tmp_path: Path) -> None:
    write_image(tmp_path / "images" / "a.jpg")
    write_image(tmp_path / "images" / "b.jpg", 1)
    records = all_records(FolderSource(tmp_path))
    assert [r.label for r in records.values()] == [None, None]


def test_root_files_get_dot_shard_and_locator_reads_back(tmp_path: Path) -> None:
    data = write_image(tmp_path / "x.png", 4)
    write_image(tmp_path / "sub" / "y.png", 5)
    src = FolderSource(tmp_path)
    shards = list(src.shards())
    assert [s.name for s in shards] == [".", "sub"]
    rec = next(src.records(shards[0]))
    assert rec.key == "x.png" and rec.shard == "."
    assert rec.locator.kind == "file" and os.path.isabs(str(rec.locator.path))
    assert rec.read_bytes() == data


def test_hidden_files_and_non_images_skipped_but_fake_images_kept(tmp_path: Path) -> None:
    write_image(tmp_path / "a.jpg")
    write_image(tmp_path / ".hidden.jpg")
    write_image(tmp_path / ".cache" / "b.jpg")
    (tmp_path / "notes.md").write_text("hello")
    (tmp_path / "broken.JPG").write_bytes(b"not an image at all")
    records = all_records(FolderSource(tmp_path))
    assert set(records) == {"a.jpg", "broken.JPG"}
    assert records["broken.JPG"].error is None  # the decoder records it as failed


def test_sidecar_caption(tmp_path: Path) -> None:
    write_image(tmp_path / "foo.jpg")
    (tmp_path / "foo.txt").write_text("  a red fox  \n", encoding="utf-8")
    write_image(tmp_path / "bar.jpg", 1)
    records = all_records(FolderSource(tmp_path))
    assert records["foo.jpg"].caption == "a red fox"
    assert records["bar.jpg"].caption is None
    assert "foo.txt" not in records


def test_fingerprints_stable_and_change_when_a_file_is_added(tmp_path: Path) -> None:
    write_image(tmp_path / "cat" / "a.jpg")
    write_image(tmp_path / "dog" / "b.jpg", 1)
    first = {s.name: s.fingerprint for s in FolderSource(tmp_path).shards()}
    again = {s.name: s.fingerprint for s in FolderSource(tmp_path).shards()}
    assert first == again
    write_image(tmp_path / "dog" / "c.jpg", 2)
    after = {s.name: s.fingerprint for s in FolderSource(tmp_path).shards()}
    assert after["cat"] == first["cat"]
    assert after["dog"] != first["dog"]


def test_fingerprint_changes_when_a_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "a.jpg"
    write_image(path)
    before = [s.fingerprint for s in FolderSource(tmp_path).shards()]
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    after = [s.fingerprint for s in FolderSource(tmp_path).shards()]
    assert before != after


def test_scandir_failure_is_an_error_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unreadable folder (scandir raises EACCES; chmod 0 is no use when tests run as root)."""
    write_image(tmp_path / "ok" / "a.jpg")
    write_image(tmp_path / "ok" / "locked" / "b.jpg")
    real_scandir = os.scandir
    locked = str(tmp_path / "ok" / "locked")

    def scandir(path: str) -> object:
        if str(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    records = all_records(FolderSource(tmp_path))
    assert records["ok/locked/"].error == "cannot read directory: Permission denied"
    assert records["ok/locked/"].locator.path == locked
    assert "ok/a.jpg" in records


def test_vanished_shard_yields_nothing(tmp_path: Path) -> None:
    write_image(tmp_path / "a" / "x.jpg")
    src = FolderSource(tmp_path)
    (shard,) = list(src.shards())
    (tmp_path / "a" / "x.jpg").unlink()
    (tmp_path / "a").rmdir()
    assert list(src.records(shard)) == []


def test_missing_root_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        FolderSource(tmp_path / "nope")


def test_symlinked_directory_not_followed(tmp_path: Path) -> None:
    write_image(tmp_path / "real" / "a.jpg")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    records = all_records(FolderSource(tmp_path))
    assert set(records) == {"real/a.jpg"}
