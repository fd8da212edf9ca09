"""WebDatasetSource: img2dataset tar shards, tar offsets, sidecars, error records, compressed shards."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.record import Record
from splitaudit.indexer.sources.webdataset import (
    WebDatasetSource,
    looks_like_webdataset,
    split_member_name,
)


def image_bytes(seed: int, fmt: str = "JPEG") -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(buf, format=fmt)
    return buf.getvalue()


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def sample(key: str, seed: int, **meta: object) -> list[tuple[str, bytes]]:
    """Members as img2dataset writes them: jpg, json, txt."""
    js = {
        "key": key,
        "url": f"https://ex.com/{key}.jpg",
        "caption": f"cap {key}",
        "status": "success",
        "width": 8,
        "height": 8,
        "original_width": 640,
        "exif": None,
        **meta,
    }
    return [
        (f"{key}.jpg", image_bytes(seed)),
        (f"{key}.json", json.dumps(js).encode()),
        (f"{key}.txt", f"txt {key}".encode()),
    ]


def all_records(src: WebDatasetSource) -> dict[str, Record]:
    return {r.key: r for s in src.shards() for r in src.records(s)}


def test_img2dataset_shard_keys_fields_metadata_and_offsets(tmp_path: Path) -> None:
    members = sample("000000000", 1, LICENSE="CC0") + sample("000000001", 2)
    write_tar(tmp_path / "00000.tar", members)
    src = WebDatasetSource(tmp_path / "00000.tar")
    records = all_records(src)
    assert list(records) == ["000000000", "000000001"]
    rec = records["000000000"]
    assert rec.caption == "txt 000000000"  # the .txt wins over the .json caption
    assert rec.url == "https://ex.com/000000000.jpg"
    assert rec.license == "CC0"
    assert rec.metadata["status"] == "success" and rec.metadata["original_width"] == 640
    assert rec.metadata["key"] == "000000000" and "caption" not in rec.metadata
    assert rec.locator.kind == "tar" and rec.shard == "00000.tar"
    assert rec.read_bytes() == members[0][1]
    assert records["000000001"].read_bytes() == members[3][1]


def test_json_caption_when_no_txt_and_cls_label(tmp_path: Path) -> None:
    write_tar(
        tmp_path / "a.tar",
        [
            ("k.png", image_bytes(1, "PNG")),
            ("k.json", b'{"caption": "from json"}'),
            ("k.cls", b"7\n"),
        ],
    )
    (rec,) = all_records(WebDatasetSource(tmp_path / "a.tar")).values()
    assert rec.caption == "from json" and rec.label == "7"


def test_json_without_image_is_error_record(tmp_path: Path) -> None:
    write_tar(tmp_path / "s.tar", [*sample("a", 1), ("b.json", b'{"caption": "lonely"}')])
    records = all_records(WebDatasetSource(tmp_path / "s.tar"))
    assert records["a"].error is None
    assert records["b"].error == "no image for key 'b' in shard s.tar"
    assert records["b"].caption == "lonely"


def test_bad_json_kept_as_metadata_error(tmp_path: Path) -> None:
    write_tar(tmp_path / "s.tar", [("a.jpg", image_bytes(1)), ("a.json", b"{oops")])
    (rec,) = all_records(WebDatasetSource(tmp_path / "s.tar")).values()
    assert rec.error is None and "not valid JSON" in rec.metadata["json_error"]


def test_non_contiguous_key_gets_unique_error_record(tmp_path: Path) -> None:
    write_tar(
        tmp_path / "s.tar", [("a.jpg", image_bytes(1)), ("b.jpg", image_bytes(2)), ("a.txt", b"x")]
    )
    src = WebDatasetSource(tmp_path / "s.tar")
    records = [r for shard in src.shards() for r in src.records(shard)]
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)) == 3
    assert "duplicate key 'a'" in str(records[2].error)


def test_directory_of_shards_sorted_and_fingerprints(tmp_path: Path) -> None:
    write_tar(tmp_path / "00001.tar", sample("000010000", 3))
    write_tar(tmp_path / "00000.tar", sample("000000000", 1))
    (tmp_path / "notes.txt").write_text("ignored")
    src = WebDatasetSource(tmp_path)
    shards = list(src.shards())
    assert [s.name for s in shards] == ["00000.tar", "00001.tar"]
    assert shards == list(WebDatasetSource(tmp_path).shards())
    write_tar(tmp_path / "00001.tar", sample("000010000", 3) + sample("000010001", 4))
    st = (tmp_path / "00001.tar").stat()
    os.utime(tmp_path / "00001.tar", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after = list(WebDatasetSource(tmp_path).shards())
    assert after[0] == shards[0] and after[1].fingerprint != shards[1].fingerprint


def test_compressed_shards_refused(tmp_path: Path) -> None:
    write_tar(tmp_path / "plain.tar", sample("a", 1))
    (tmp_path / "s.tar.gz").write_bytes(gzip.compress((tmp_path / "plain.tar").read_bytes()))
    with pytest.raises(InputError, match="uncompressed"):
        WebDatasetSource(tmp_path / "s.tar.gz")
    # gzip content behind a .tar name is caught when the shard is read
    (tmp_path / "sneaky.tar").write_bytes((tmp_path / "s.tar.gz").read_bytes())
    src = WebDatasetSource([tmp_path / "sneaky.tar"])
    with pytest.raises(InputError, match="uncompressed"):
        list(src.records(next(src.shards())))


def test_dir_with_only_compressed_shards_says_so(tmp_path: Path) -> None:
    (tmp_path / "0.tar.gz").write_bytes(gzip.compress(b"x"))
    with pytest.raises(InputError, match="uncompressed"):
        WebDatasetSource(tmp_path)


def test_truncated_tar_yields_error_record_after_good_samples(tmp_path: Path) -> None:
    write_tar(tmp_path / "s.tar", sample("a", 1) + sample("b", 2))
    data = (tmp_path / "s.tar").read_bytes()
    # cut inside the second sample's image data
    cut = data.index(b"b.jpg") + 600
    (tmp_path / "s.tar").write_bytes(data[:cut])
    records = list(all_records(WebDatasetSource(tmp_path / "s.tar")).values())
    assert records[0].key == "a" and records[0].error is None
    assert records[-1].error is not None and "corrupt or truncated" in records[-1].error
    assert len(records) == 2


def test_split_member_name_and_detection(tmp_path: Path) -> None:
    assert split_member_name("./dir/abc.seg.png") == ("dir/abc", "seg.png")
    assert split_member_name("abc") is None
    write_tar(tmp_path / "wds.tar", sample("a", 1))
    write_tar(
        tmp_path / "plain.tar", [("cat/a.jpg", image_bytes(1)), ("dog/b.jpg", image_bytes(2))]
    )
    assert looks_like_webdataset(tmp_path / "wds.tar")
    assert not looks_like_webdataset(tmp_path / "plain.tar")


def test_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        WebDatasetSource(tmp_path / "none.tar")
