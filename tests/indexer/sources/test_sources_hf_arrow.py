"""``save_to_disk`` folders: Arrow stream files, features from dataset_info.json, batch locators."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import photo
from helpers.hf_layout import HFRows, jpeg, write_save_to_disk

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.hf_arrow import HFArrowSource
from splitaudit.indexer.sources.open import open_source, open_split
from splitaudit.indexer.sources.record import Locator

NAMES = ("bird", "cat")


def _rows(n: int, start: int = 0) -> HFRows:
    return HFRows(
        images=[jpeg(photo(start + i, (40, 30))) for i in range(n)],
        labels=[(start + i) % 2 for i in range(n)],
        captions=[f"caption {start + i}" for i in range(n)],
        names=NAMES,
    )


def _all(source: object) -> list:
    return [r for shard in source.shards() for r in source.records(shard)]  # type: ignore[attr-defined]


def test_dataset_folder_reads_features_from_dataset_info(tmp_path: Path) -> None:
    folder = write_save_to_disk(tmp_path / "saved", _rows(5), batch_rows=2)

    source = open_split(folder)
    records = _all(source)

    assert isinstance(source, HFArrowSource)
    assert [r.label for r in records] == ["bird", "cat", "bird", "cat", "bird"]
    assert records[3].key == "data-00000-of-00001.arrow#3"
    loc = records[3].locator
    assert (loc.kind, loc.offset, loc.size, loc.member) == (
        "arrow",
        1,
        1,
        "image",
    )  # batch 1, row 1
    assert loc.read_bytes() == records[3].data == jpeg(photo(3, (40, 30)))
    assert records[3].caption == "caption 3"


def test_dataset_dict_has_one_folder_per_split(tmp_path: Path) -> None:
    root = tmp_path / "dd"
    write_save_to_disk(root / "train", _rows(2), schema_metadata=True)
    write_save_to_disk(root / "test", _rows(3, start=2))
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))

    source = open_source(root)

    assert [s.name for s in source.shards()] == [
        "train/data-00000-of-00001.arrow",
        "test/data-00000-of-00001.arrow",
    ]
    assert [r.caption for r in _all(source)] == [f"caption {i}" for i in range(5)]
    single = open_source(root / "test" / "data-00000-of-00001.arrow")
    assert [r.label for r in _all(single)] == ["bird", "cat", "bird"]


def test_incomplete_folders_say_what_is_missing(tmp_path: Path) -> None:
    folder = write_save_to_disk(tmp_path / "saved", _rows(1))
    (folder / "data-00000-of-00001.arrow").rename(folder / "moved.arrow")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dataset_info.json").write_text("{}")
    (broken / "data.arrow").write_bytes(b"not arrow")

    with pytest.raises(
        InputError, match=r"state\.json lists data-00000-of-00001\.arrow, which are missing"
    ):
        open_source(folder)
    with pytest.raises(InputError, match="not a readable Arrow file"):
        open_source(broken)
    with pytest.raises(OSError):
        Locator(
            kind="arrow", path=str(folder / "moved.arrow"), offset=9, size=0, member="image"
        ).read_bytes()
