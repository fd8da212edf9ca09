"""Hugging Face Parquet datasets: image column by type, ClassLabel names, row-group locators."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import photo
from helpers.hf_layout import HFRows, jpeg, write_parquet

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.hf_parquet import HFParquetSource
from splitaudit.indexer.sources.manifest import ManifestSource
from splitaudit.indexer.sources.open import open_source, open_split
from splitaudit.indexer.sources.record import Locator

NAMES = ("airplane", "cat", "dog")


def _rows(n: int, start: int = 0) -> HFRows:
    return HFRows(
        images=[jpeg(photo(start + i, (48, 32))) for i in range(n)],
        labels=[(start + i) % 3 for i in range(n)],
        captions=[f"picture number {start + i}" for i in range(n)],
        names=NAMES,
    )


def _all(source: object) -> list:
    return [r for shard in source.shards() for r in source.records(shard)]  # type: ignore[attr-defined]


def test_datasets_layout_folder_maps_labels_and_locates_rows(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_parquet(root / "data" / "test-00000-of-00002.parquet", _rows(6), row_group_size=4)
    write_parquet(root / "data" / "test-00001-of-00002.parquet", _rows(3, start=6))
    (root / "README.md").write_text("# dataset card")

    source = open_source(root)
    records = _all(source)

    assert isinstance(source, HFParquetSource)
    assert [s.name for s in source.shards()] == [
        "data/test-00000-of-00002.parquet",
        "data/test-00001-of-00002.parquet",
    ]
    assert [r.label for r in records] == [NAMES[i % 3] for i in range(9)]
    assert records[5].key == "data/test-00000-of-00002.parquet#5"
    assert records[5].caption == "picture number 5"
    assert records[5].metadata == {"image_path": "img0005.jpg"}
    loc = records[5].locator
    assert (loc.kind, loc.offset, loc.size, loc.member) == (
        "parquet",
        1,
        1,
        "image",
    )  # row group 1, row 1
    assert loc.uri().endswith("test-00000-of-00002.parquet#row_group=1&row=1&column=image")
    # The bytes travel with the record, and the locator finds the same bytes again.
    assert records[5].read_bytes() == jpeg(photo(5, (48, 32)))
    assert (
        Locator(kind="parquet", path=loc.path, offset=1, size=1, member="image").read_bytes()
        == records[5].data
    )


def test_repo_snapshot_with_config_and_split_folders_and_a_glob(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    write_parquet(snap / "plain" / "train" / "0000.parquet", _rows(2))
    write_parquet(snap / "plain" / "test" / "0000.parquet", _rows(3, start=2))

    whole = open_source(snap)
    only_test = open_source(str(snap / "plain" / "test" / "*.parquet"))

    assert [s.name for s in whole.shards()] == [
        "plain/test/0000.parquet",
        "plain/train/0000.parquet",
    ]
    assert len(_all(whole)) == 5
    assert [r.caption for r in _all(only_test)] == [f"picture number {i}" for i in (2, 3, 4)]


def test_binary_column_named_with_image_column_and_reopened_from_uri(tmp_path: Path) -> None:
    table = pa.table(
        {
            "png": [jpeg(photo(1))],
            "thumb": [jpeg(photo(2))],
            "label": ["cat"],
            "text": ["a cat"],
            "filename": ["cat_01.jpg"],
        }
    )
    path = tmp_path / "two.parquet"
    pq.write_table(table, path)

    with pytest.raises(InputError, match=r"several columns could hold the image.*--image-column"):
        open_source(path)
    source = open_source(path, image_column="thumb")
    (record,) = _all(source)
    again = open_split(source.uri)  # a stored split's source re-opens with the same column

    assert record.read_bytes() == jpeg(photo(2))
    assert (record.label, record.caption, record.metadata) == (
        "cat",
        "a cat",
        {"filename": "cat_01.jpg"},
    )
    assert [r.data for r in _all(again)] == [record.data]
    assert (
        Locator(kind="parquet", path=str(path), offset=0, size=0, member="thumb").read_bytes()
        == record.data
    )


def test_unlabelled_rows_and_rows_without_bytes(tmp_path: Path) -> None:
    rows = _rows(3)
    rows.labels[1] = -1  # datasets' "no label"
    rows.images[2] = b""
    path = write_parquet(tmp_path / "test.parquet", rows)

    records = _all(open_source(path))

    assert [r.label for r in records] == ["airplane", None, "dog"]
    assert records[2].error is not None and "no image bytes" in records[2].error
    assert records[2].data is None


def test_manifests_stay_manifests_and_bad_tables_say_what_to_do(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.parquet"
    pq.write_table(pa.table({"path": ["a.jpg"], "caption": ["x"]}), manifest)
    neither = tmp_path / "neither.parquet"
    pq.write_table(pa.table({"id": [1], "caption": ["x"]}), neither)
    ds = write_parquet(tmp_path / "ds" / "test.parquet", _rows(1))

    assert isinstance(open_source(manifest), ManifestSource)
    with pytest.raises(InputError, match=r"no image column.*--image-column; nor is it a manifest"):
        open_source(neither)
    with pytest.raises(
        InputError, match="no column 'img' for --image-column; columns: image, label, caption"
    ):
        open_source(ds, image_column="img")
    with pytest.raises(InputError, match="'caption' is string, not image bytes"):
        open_source(ds, image_column="caption")
    with pytest.raises(InputError, match="no Parquet files match"):
        open_source(str(tmp_path / "nothing-*.parquet"))


def test_changed_file_is_a_missing_source_not_a_crash(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "t.parquet", _rows(2), row_group_size=1)
    stale = Locator(kind="parquet", path=str(path), offset=5, size=0, member="image")
    gone = Locator(
        kind="parquet", path=str(tmp_path / "gone.parquet"), offset=0, size=0, member="image"
    )

    cell = Locator(kind="parquet", path=str(path), offset=1, size=0, member="image")
    before = cell.read_bytes()
    write_parquet(path, _rows(2, start=50), row_group_size=1)  # replaced in place

    assert before == jpeg(photo(1, (48, 32)))
    assert cell.read_bytes() == jpeg(photo(51, (48, 32)))  # never a stale cached row group
    with pytest.raises(OSError, match="no row group 5"):
        stale.read_bytes()
    with pytest.raises(OSError):
        gone.read_bytes()


def test_path_only_images_are_read_only_inside_the_dataset_folder(tmp_path: Path) -> None:
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(jpeg(photo(7)))
    beside = tmp_path / "ds" / "images" / "a.jpg"
    beside.parent.mkdir(parents=True)
    beside.write_bytes(jpeg(photo(8)))
    rows = _rows(3)
    rows.images[:] = [b"", b"", b""]
    rows.image_paths[:] = ["images/a.jpg", str(outside), "../secret.jpg"]
    path = write_parquet(tmp_path / "ds" / "test.parquet", rows)

    inside, absolute, climbing = _all(open_source(path))

    assert (inside.error, inside.locator.kind) == (None, "file")
    assert inside.read_bytes() == beside.read_bytes()
    for record in (absolute, climbing):
        assert record.locator.kind == "none"
        assert record.error is not None and "not a file inside the dataset's folder" in record.error


def test_reindexing_a_parquet_dataset_adds_nothing(tmp_path: Path) -> None:
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.workspace import Workspace

    root = tmp_path / "ds"
    write_parquet(root / "data" / "train-00000-of-00001.parquet", _rows(5), row_group_size=2)
    ws = Workspace.open(tmp_path / "home")
    try:
        first = index_sources(ws, "c", [open_source(root)], embedder=None)
        again = index_sources(ws, "c", [open_source(root)], embedder=None)
    finally:
        ws.close()

    assert (first.indexed, first.failed) == (5, 0)
    assert again.indexed == 0 and again.shards_skipped == 1
