"""Label names files (JSON / CSV / TSV / ImageNet text) and the terms built from them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.labels.names import is_numeric_id, label_terms, load_label_names


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_json_lists_strings_and_comma_separated_names(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "names.json",
        '{"n02123045": ["tabby", "tabby cat"], "0": "airplane", "n01440764": "tench, Tinca tinca"}',
    )
    assert load_label_names(path) == {
        "n02123045": ["tabby", "tabby cat"],
        "0": ["airplane"],
        "n01440764": ["tench", "Tinca tinca"],
    }


def test_json_torchvision_class_index_and_duplicate_keys_merge(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.json", '{"281": ["n02123045", "tabby"], "281": "tabby cat|tabby"}')
    assert load_label_names(path) == {"281": ["n02123045", "tabby", "tabby cat"]}


def test_csv_rows_header_pipes_and_extra_columns(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "names.csv",
        "\ufefflabel,name\n"
        "n02123045,tabby\n"
        "n02123045,tabby cat\n"
        "\n"
        "3,three|trois\n"
        'n01440764,"tench, Tinca tinca",tench fish\n'
        "café,Café crème\n",
    )
    assert load_label_names(path) == {
        "n02123045": ["tabby", "tabby cat"],
        "3": ["three", "trois"],
        "n01440764": ["tench", "Tinca tinca", "tench fish"],
        "café": ["Café crème"],
    }


def test_tsv_and_imagenet_synset_text(tmp_path: Path) -> None:
    tsv = _write(tmp_path, "names.tsv", "n02123045\ttabby|tabby cat\n")
    assert load_label_names(tsv) == {"n02123045": ["tabby", "tabby cat"]}
    txt = _write(tmp_path, "LOC_synset_mapping.txt", "n01440764 tench, Tinca tinca\n# x\n")
    assert load_label_names(txt) == {"n01440764": ["tench", "Tinca tinca"]}


def test_json_without_suffix_is_sniffed(tmp_path: Path) -> None:
    path = _write(tmp_path, "names", ' {"a": "b"}')
    assert load_label_names(path) == {"a": ["b"]}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", '{\n"a": ["b"],\n"c": [}', r"bad\.json:3: not valid JSON"),
        ("list.json", '["a", "b"]', r"list\.json:1: .*must be an object"),
        ("num.json", '{"a": "b",\n "c": 3}', r"num\.json:2: label 'c' must map to a name"),
        ("nested.json", '{"a": {"b": "c"}}', r"nested\.json:1: label 'a' must map"),
        ("emptylist.json", '{"a": []}', r"label 'a' must map"),
        ("blank.json", '{"a": " , |"}', r"label 'a' has no names"),
        ("one.csv", "label,name\ncat,cat\ndog\n", r"one\.csv:3: expected 'label,name'"),
        ("nolabel.csv", ",cat\n", r"nolabel\.csv:1: expected"),
        ("noname.csv", "cat,cat\ndog, |\n", r"noname\.csv:2: label 'dog' has an empty name"),
        ("bad.txt", "n01440764\n", r"bad\.txt:1: expected 'label name"),
        ("empty.csv", "\n\n", r"contains no labels"),
        ("empty.json", "{}", r"contains no labels"),
    ],
)
def test_bad_files_raise_input_error_with_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load_label_names(_write(tmp_path, name, text))


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_label_names(tmp_path / "nope.csv")
    path = _write(tmp_path, "latin1.csv", b"a,b\ncaf\xe9,caf\xe9\n")
    with pytest.raises(InputError, match=r"latin1\.csv:2: not UTF-8"):
        load_label_names(path)


@pytest.mark.parametrize(
    ("label", "numeric"),
    [
        ("3", True),
        ("007", True),
        ("12-3", True),
        ("n02123045", False),
        ("cat", False),
        ("3d", False),
        ("", False),
    ],
)
def test_is_numeric_id(label: str, numeric: bool) -> None:
    assert is_numeric_id(label) is numeric


def test_label_terms_adds_id_unless_numeric(caplog: pytest.LogCaptureFixture) -> None:
    names = {"n02123045": ["tabby", "tabby cat", "tabby"], "0": ["airplane"], "x": ["y"]}
    with caplog.at_level(logging.WARNING, logger="splitaudit.indexer.labels.names"):
        terms = label_terms(["n02123045", "0", "7", "tabby_cat", "0"], names)
    assert terms == {
        "n02123045": ["n02123045", "tabby", "tabby cat"],
        "0": ["airplane"],
        "7": [],
        "tabby_cat": ["tabby_cat"],
    }
    assert "1 numeric label(s) have no names" in caplog.text
