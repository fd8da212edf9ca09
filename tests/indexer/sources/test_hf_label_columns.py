"""Hugging Face splits: the dataset's own id column keys the rows, label-restating columns are no self-leak."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import photo
from helpers.hf_layout import jpeg

import splitaudit
from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.hf_features import LABEL_DERIVED_KEY
from splitaudit.indexer.sources.open import open_split

NAMES = ["cat", "dog"]


def _split(path: Path) -> Path:
    """4 rows: id, image, ClassLabel label, its name as text, and a free-text note (row 17 leaks)."""
    ids = [17, 3, 250, 42]
    labels = [0, 1, 0, 1]
    notes = ["my cat on the sofa", "garden", "kitchen", "street"]
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("image", image_type),
            ("label", pa.int64()),
            ("label_name", pa.string()),
            ("note", pa.string()),
            ("animal", pa.string()),  # restates the label under another name
        ]
    )
    features = {
        "id": {"dtype": "int64", "_type": "Value"},
        "image": {"_type": "Image"},
        "label": {"names": NAMES, "_type": "ClassLabel"},
        "label_name": {"dtype": "string", "_type": "Value"},
        "note": {"dtype": "string", "_type": "Value"},
        "animal": {"dtype": "string", "_type": "Value"},
    }
    schema = schema.with_metadata(
        {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    )
    table = pa.Table.from_pydict(
        {
            "id": ids,
            "image": [
                {"bytes": jpeg(photo(100 + i, (96, 72))), "path": f"{i}.jpg"} for i in range(4)
            ],
            "label": labels,
            "label_name": [NAMES[x] for x in labels],
            "note": notes,
            "animal": [NAMES[x].upper() for x in labels],
        },
        schema=schema,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def test_rows_are_keyed_by_the_dataset_id_and_mark_label_columns(tmp_path: Path) -> None:
    split = _split(tmp_path / "split" / "test-00000-of-00001.parquet")
    source = open_split(str(split.parent))
    records = [r for shard in source.shards() for r in source.records(shard)]
    assert [r.key for r in records] == ["17", "3", "250", "42"]
    assert records[0].label == "cat"
    assert records[0].metadata[LABEL_DERIVED_KEY] == ["label_name", "animal"]
    assert records[0].metadata["note"] == "my cat on the sofa"


def test_self_leaks_skip_label_columns_and_say_what_was_read(tmp_path: Path) -> None:
    split = _split(tmp_path / "split" / "test-00000-of-00001.parquet")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in range(4):
        photo(seed, (96, 72)).save(corpus / f"{seed}.png")
    home = tmp_path / "home"
    splitaudit.index(corpus, corpus="c", home=home, embed=False, progress=False)
    result = splitaudit.audit(
        split.parent, corpus="c", home=home, fail_on="label_leak", progress=False
    )
    leaks = {
        item["key"]: match
        for item in result.items
        for match in item["matches"]
        if match["kind"] == "label_leak"
    }
    assert set(leaks) == {"17"}  # before: all 4 rows, from label_name / animal
    evidence = leaks["17"]["evidence"]
    assert [hit["field"] for hit in evidence["hits"]] == ["metadata.note"]
    assert evidence["label_columns_skipped"] == ["animal", "label_name"]
    assert "note" in evidence["metadata_read"]
    assert "label_name" not in evidence["metadata_read"]
    assert [item["key"] for item in result.items] == ["3", "17", "42", "250"]


def test_key_column_names_the_rows_everywhere(tmp_path: Path) -> None:
    split = _split(tmp_path / "split" / "test-00000-of-00001.parquet")
    source = open_split(str(split.parent), key_column="note")
    assert [r.key for shard in source.shards() for r in source.records(shard)] == [
        "my cat on the sofa",
        "garden",
        "kitchen",
        "street",
    ]
    with pytest.raises(InputError, match="no column 'nope' for --key-column"):
        open_split(str(split.parent), key_column="nope")

    home = tmp_path / "home"
    splitaudit.index(
        split.parent, corpus="c", home=home, embed=False, progress=False, key_column="note"
    )
    report = tmp_path / "r.json"
    done = CliRunner().invoke(
        cli,
        [
            "audit",
            str(split.parent),
            "--corpus",
            "c",
            "--home",
            str(home),
            "--key-column",
            "id",
            "--json",
            str(report),
            "-q",
        ],
        env={"SPLITAUDIT_HOME": None, "SPLITAUDIT_DATABASE_URL": None},
    )
    assert done.exit_code == 1, done.output  # every row is in the corpus: exact
    items = json.loads(report.read_text())["items"]
    assert [i["key"] for i in items] == ["3", "17", "42", "250"]
    assert {i["key"]: i["matches"][0]["corpus_key"] for i in items}["17"] == "my cat on the sofa"

    folder = tmp_path / "photos"
    folder.mkdir()
    photo(1, (64, 48)).save(folder / "a.png")
    wrong = CliRunner().invoke(
        cli,
        ["audit", str(folder), "--corpus", "c", "--home", str(home), "--key-column", "id", "-q"],
        env={"SPLITAUDIT_HOME": None, "SPLITAUDIT_DATABASE_URL": None},
    )
    assert wrong.exit_code == 2 and "--key-column applies to Hugging Face datasets" in wrong.output
