"""Archives: unsafe members refused, zip-bomb limits, safe extraction, in-place reading."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.errors import InputError, UnsafeArchiveError
from splitaudit.indexer.sources.archive import ArchiveSource, extract_archive, safe_member_name
from splitaudit.indexer.sources.record import Record


def image_bytes(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def write_zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)


def write_tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    with tarfile.open(path, mode) as tf:  # type: ignore[call-overload]
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def tar_with(path: Path, info: tarfile.TarInfo, data: bytes = b"") -> None:
    with tarfile.open(path, "w") as tf:
        tf.addfile(info, io.BytesIO(data) if data else None)


def all_records(src: ArchiveSource) -> dict[str, Record]:
    return {r.key: r for s in src.shards() for r in src.records(s)}


SPLIT = [("cat/a.png", image_bytes(1)), ("dog/b.png", image_bytes(2)), ("dog/b.txt", b"a dog")]


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../evil.png", "a/../../evil.png", "C:/x.png", "..\\x.png"]
)
def test_unsafe_names_refused(name: str) -> None:
    with pytest.raises(UnsafeArchiveError, match="refused"):
        safe_member_name(name)


def test_safe_names_normalised() -> None:
    assert safe_member_name("./a//b/c.png") == "a/b/c.png"


@pytest.mark.parametrize("bad", ["/abs.png", "../up.png"])
@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_extract_refuses_escaping_members_and_writes_nothing(
    tmp_path: Path, kind: str, bad: str
) -> None:
    arc = tmp_path / f"split.{kind}"
    members = [("ok.png", image_bytes(1)), (bad, b"x")]
    write_zip(arc, members) if kind == "zip" else write_tar(arc, members)
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=repr(bad)):
        extract_archive(arc, dest)
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "up.png").exists()
    with pytest.raises(UnsafeArchiveError):
        ArchiveSource(arc)


def test_tar_symlink_hardlink_and_device_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("link.png")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("hard.png")
    hard.type, hard.linkname = tarfile.LNKTYPE, "ok.png"
    dev = tarfile.TarInfo("dev")
    dev.type = tarfile.CHRTYPE
    for i, info in enumerate([link, hard, dev]):
        arc = tmp_path / f"{i}.tar"
        tar_with(arc, info)
        with pytest.raises(UnsafeArchiveError, match=repr(info.name)):
            extract_archive(arc, tmp_path / f"out{i}")
        with pytest.raises(UnsafeArchiveError, match=repr(info.name)):
            ArchiveSource(arc)


def test_zip_symlink_refused(tmp_path: Path) -> None:
    arc = tmp_path / "s.zip"
    info = zipfile.ZipInfo("link.png")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(arc, "w") as zf:
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnsafeArchiveError, match="symlink"):
        extract_archive(arc, tmp_path / "out")


def test_zip_bomb_size_limit(tmp_path: Path) -> None:
    arc = tmp_path / "bomb.zip"
    write_zip(arc, [("zeros.png", b"\0" * 2_000_000)])
    assert arc.stat().st_size < 20_000
    with pytest.raises(InputError, match="at most 1000000"):
        extract_archive(arc, tmp_path / "out", max_bytes=1_000_000)
    assert list((tmp_path / "out").iterdir()) == []


def test_tar_gz_bomb_size_limit(tmp_path: Path) -> None:
    arc = tmp_path / "bomb.tar.gz"
    write_tar(arc, [("a.png", b"\0" * 600_000), ("b.png", b"\0" * 600_000)], mode="w:gz")
    with pytest.raises(InputError, match="more than 1000000 bytes"):
        extract_archive(arc, tmp_path / "out", max_bytes=1_000_000)
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_member_count_limit(tmp_path: Path, kind: str) -> None:
    arc = tmp_path / f"many.{kind}"
    members = [(f"{i}.png", b"x") for i in range(20)]
    write_zip(arc, members) if kind == "zip" else write_tar(arc, members)
    with pytest.raises(InputError, match="10"):
        extract_archive(arc, tmp_path / "out", max_members=10)


@pytest.mark.parametrize("suffix,mode", [("zip", None), ("tar", "w"), ("tar.gz", "w:gz")])
def test_extract_unwraps_single_folder_and_skips_macos_junk(
    tmp_path: Path, suffix: str, mode: str | None
) -> None:
    arc = tmp_path / f"split.{suffix}"
    members = [(f"mysplit/{n}", d) for n, d in SPLIT] + [("__MACOSX/mysplit/._a.png", b"junk")]
    write_zip(arc, members) if mode is None else write_tar(arc, members, mode)
    root = extract_archive(arc, tmp_path / "out")
    assert root == (tmp_path / "out" / "mysplit").resolve()
    assert (root / "cat" / "a.png").read_bytes() == SPLIT[0][1]
    assert not (tmp_path / "out" / "__MACOSX").exists()


def test_extract_needs_empty_dest_and_an_archive(tmp_path: Path) -> None:
    arc = tmp_path / "s.zip"
    write_zip(arc, SPLIT)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(InputError, match="not empty"):
        extract_archive(arc, tmp_path / "out")
    (tmp_path / "plain.txt").write_text("hello")
    with pytest.raises(InputError, match="not a zip or tar"):
        extract_archive(tmp_path / "plain.txt", tmp_path / "out2")


def test_corrupt_zip_member_is_input_error(tmp_path: Path) -> None:
    arc = tmp_path / "s.zip"
    write_zip(arc, [("a.png", image_bytes(1) * 50)])
    data = bytearray(arc.read_bytes())
    data[60:70] = b"\xff" * 10  # inside the deflated data
    arc.write_bytes(bytes(data))
    with pytest.raises(InputError):
        extract_archive(arc, tmp_path / "out")


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_archive_source_in_place(tmp_path: Path, kind: str) -> None:
    arc = tmp_path / f"split.{kind}"
    members = [(f"wrap/{n}", d) for n, d in SPLIT]
    write_zip(arc, members) if kind == "zip" else write_tar(arc, members)
    src = ArchiveSource(arc)
    records = all_records(src)
    assert set(records) == {"cat/a.png", "dog/b.png"}
    assert records["cat/a.png"].label == "cat" and records["dog/b.png"].caption == "a dog"
    assert records["cat/a.png"].locator.kind == kind
    assert records["dog/b.png"].read_bytes() == SPLIT[1][1]
    (shard,) = src.shards()
    assert shard.name == arc.name and shard == next(ArchiveSource(arc).shards())


def test_archive_source_labels_csv(tmp_path: Path) -> None:
    arc = tmp_path / "s.zip"
    write_zip(
        arc,
        [
            ("a.png", image_bytes(1)),
            ("b.png", image_bytes(2)),
            ("labels.csv", b"key,label\na.png,owl\nb,cow\n"),
        ],
    )
    records = all_records(ArchiveSource(arc))
    assert (records["a.png"].label, records["b.png"].label) == ("owl", "cow")


def test_archive_source_refuses_compressed_tar(tmp_path: Path) -> None:
    arc = tmp_path / "s.tar.gz"
    write_tar(arc, SPLIT, mode="w:gz")
    with pytest.raises(InputError, match="compressed"):
        ArchiveSource(arc)


def test_a_zip_member_in_an_unreadable_compression_method_is_an_input_error(
    tmp_path: Path,
) -> None:
    arc = tmp_path / "d64.zip"
    with zipfile.ZipFile(arc, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("a.jpg", image_bytes(1))
    raw = bytearray(arc.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # local + central header
        at = raw.index(signature) + offset
        raw[at : at + 2] = (9).to_bytes(2, "little")  # Deflate64: zipfile cannot decompress it
    arc.write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"'a.jpg'.*deflate64.*re-pack"):
        extract_archive(arc, tmp_path / "out")
