"""``--keep largest`` / ``smallest``: equal pixel counts go to the larger file (the original, not a JPEG-40 copy)."""

from __future__ import annotations

from pathlib import Path

from conftest import photo

import splitaudit
from splitaudit.indexer.dedup.keep import MemberInfo, kept_member, stored_bytes


def test_equal_pixels_keep_the_larger_file() -> None:
    copy = MemberInfo(1, "a_copy.jpg", 320, 240, nbytes=9_000)
    original = MemberInfo(2, "z_original.png", 320, 240, nbytes=150_000)
    bigger = MemberInfo(3, "m_bigger.jpg", 640, 480, nbytes=50_000)
    assert kept_member([copy, original], "largest") is original
    assert kept_member([copy, original], "smallest") is original
    assert kept_member([copy, original, bigger], "largest") is bigger  # pixels first
    unknown = MemberInfo(4, "b.jpg", 320, 240)
    assert kept_member([unknown, copy], "largest") is copy


def test_stored_bytes_reads_files_and_tar_members(tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    f.write_bytes(b"12345")
    assert stored_bytes({"kind": "file", "path": str(f)}) == 5
    assert stored_bytes({"kind": "file", "path": str(tmp_path / "gone")}) == 0
    assert stored_bytes({"kind": "tar", "path": "s.tar", "offset": 512, "size": 77}) == 77
    assert stored_bytes({"kind": "url", "url": "http://x"}) == 0
    assert stored_bytes(None) == 0


def test_dedup_keeps_the_original_over_its_jpeg_40_copy(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    original = photo(7, (320, 240))
    original.save(corpus / "z_original.png")
    original.save(corpus / "a_copy.jpg", quality=40)  # same pixels count, sorts first by name
    for seed in range(3):
        photo(seed, (320, 240)).save(corpus / f"other{seed}.png")
    home = tmp_path / "home"
    splitaudit.index(corpus, corpus="c", home=home, embed=False, progress=False)
    dups = splitaudit.dedup(corpus="c", home=home, keep="largest", progress=False)
    assert [c["kept"] for c in dups.clusters] == ["z_original.png"]  # before: a_copy.jpg
    assert dups.drop_keys == ["a_copy.jpg"]
