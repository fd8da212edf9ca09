"""count_hint: every source that can tell its item count without decoding says the count it yields."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from conftest import photo
from helpers.hf_layout import HFRows, jpeg, write_parquet, write_save_to_disk

from splitaudit.indexer.pipeline.progress_log import count_folder_images, try_count_images
from splitaudit.indexer.sources.archive import ArchiveSource
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from splitaudit.indexer.sources.hf_arrow import HFArrowSource
from splitaudit.indexer.sources.hf_parquet import HFParquetSource
from splitaudit.indexer.sources.manifest import ManifestSource
from splitaudit.indexer.sources.webdataset import WebDatasetSource


def _rows(n: int) -> HFRows:
    return HFRows(
        images=[jpeg(photo(i, (48, 32))) for i in range(n)],
        labels=[i % 2 for i in range(n)],
        captions=[f"picture {i}" for i in range(n)],
        names=("cat", "dog"),
    )


def _yielded(source: object) -> int:
    return sum(1 for s in source.shards() for _ in source.records(s))  # type: ignore[attr-defined]


def test_parquet_dataset_counts_rows_of_every_file_from_the_footers(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_parquet(root / "data" / "test-00000-of-00002.parquet", _rows(7), row_group_size=3)
    write_parquet(root / "data" / "test-00001-of-00002.parquet", _rows(4))
    source = HFParquetSource(root)
    assert source.count_hint() == 11 == _yielded(source)
    assert count_folder_images([source]) == 11


def test_save_to_disk_counts_rows_of_every_record_batch(tmp_path: Path) -> None:
    source = HFArrowSource(write_save_to_disk(tmp_path / "saved", _rows(8), batch_rows=3))
    assert source.count_hint() == 8 == _yielded(source)


def test_manifests_count_data_rows_not_header_or_blank_lines(tmp_path: Path) -> None:
    for i in range(3):
        photo(i, (32, 32)).save(tmp_path / f"{i}.png")
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("path,label\n0.png,a\n\n1.png,b\n2.png,a\n")
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps({"path": f"{i}.png"}) + "\n\n" for i in range(3)))
    pq_path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"path": [f"{i}.png" for i in range(3)]}), pq_path)
    for path in (csv_path, jsonl, pq_path):
        source = ManifestSource(path, chunk_rows=2)
        assert source.count_hint() == 3 == _yielded(source), path.name


def test_archive_counts_image_members_only(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(3):
            buf = io.BytesIO()
            photo(i, (32, 32)).save(buf, format="PNG")
            zf.writestr(f"cat/{i}.png", buf.getvalue())
        zf.writestr("cat/0.txt", "a caption")
        zf.writestr("README.md", "not an image")
    source = ArchiveSource(path)
    assert source.count_hint() == 3 == _yielded(source)


def _tar(path: Path, members: list[tuple[str, bytes]]) -> None:
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_webdataset_counts_samples_from_member_headers(tmp_path: Path) -> None:
    image = jpeg(photo(0, (32, 32)))
    _tar(
        tmp_path / "00000.tar",
        [("a.jpg", image), ("a.txt", b"x"), ("a.json", b"{}"), ("b.jpg", image), ("c.json", b"{}")],
    )
    _tar(tmp_path / "00001.tar", [("d.jpg", image), ("d.cls", b"1")])
    source = WebDatasetSource(tmp_path)
    # c has no image: it still yields (an error record), so it counts.
    assert source.count_hint() == 4 == _yielded(source)


def test_clip_retrieval_counts_metadata_rows(tmp_path: Path) -> None:
    for i, n in enumerate((3, 2)):
        (tmp_path / "img_emb").mkdir(exist_ok=True)
        (tmp_path / "metadata").mkdir(exist_ok=True)
        np.save(tmp_path / "img_emb" / f"img_emb_{i}.npy", np.ones((n, 4), np.float32))
        pq.write_table(
            pa.table({"url": [f"https://x/{i}/{j}.jpg" for j in range(n)]}),
            tmp_path / "metadata" / f"metadata_{i}.parquet",
        )
    source = PrecomputedEmbeddingSource(tmp_path)
    assert source.count_hint() == 5 == _yielded(source)


def test_an_unreadable_source_gives_no_total_rather_than_an_error(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    path = write_parquet(root / "data" / "test.parquet", _rows(2))
    source = HFParquetSource(root)
    path.write_bytes(b"not parquet any more")
    assert try_count_images([source]) is None
