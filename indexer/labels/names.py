"""Label names files (label id -> names and synonyms) and the terms matched for each label.

Accepted files (UTF-8, a BOM is fine):

- JSON object, label id -> a name string or a list of name strings:
  ``{"n02123045": ["tabby", "tabby cat"]}``, ``{"0": "airplane"}``, and torchvision's
  ``imagenet_class_index.json`` (``{"281": ["n02123045", "tabby"]}``).
- CSV (``.csv``; ``.tsv`` is tab-separated): ``label,name`` rows, several rows per label
  allowed; further columns are more names. An optional header row ``label,name`` is skipped.
- Text (``.txt``): ImageNet's ``LOC_synset_mapping.txt`` layout, ``label names...`` with the
  label and the names separated by the first run of whitespace.

Every name string is split on ``|`` and ``,`` (``"tabby, tabby cat"``, ``"tabby|tabby cat"``)
and stripped; so a single name cannot contain those characters.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import InputError

__all__ = ["is_numeric_id", "label_terms", "load_label_names", "split_names"]

log = logging.getLogger(__name__)

_NAME_SPLIT = re.compile(r"[|,]")
_NUMERIC_ID = re.compile(r"[\W_]*(?:\d+[\W_]*)+")
_HEADER_LABEL = {"label", "labels", "id", "label_id", "class", "class_id", "wnid", "synset"}
_HEADER_NAME = {"name", "names", "label_name", "class_name", "synonyms"}


def split_names(value: str) -> list[str]:
    """Split one name string on ``|`` and ``,`` into stripped, non-empty names."""
    return [n.strip() for n in _NAME_SPLIT.split(value) if n.strip()]


def is_numeric_id(label: str) -> bool:
    """True for ids made only of digits and separators (``"3"``, ``"007"``, ``"12-3"``)."""
    return _NUMERIC_ID.fullmatch(label) is not None


def _add(out: dict[str, list[str]], label: str, names: Iterable[str]) -> None:
    bucket = out.setdefault(label, [])
    for name in names:
        if name not in bucket:
            bucket.append(name)


def _line_of(raw: str, needle: str) -> int:
    pos = raw.find(needle)
    return raw.count("\n", 0, pos) + 1 if pos >= 0 else 1


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's (key, value) pairs in file order, duplicates kept."""


def _load_json(raw: str, where: str) -> dict[str, list[str]]:
    try:
        data = json.loads(raw, object_pairs_hook=_Pairs)
    except RecursionError as exc:
        raise InputError(
            f"{where}: nested too deeply to be read as JSON; expected a flat object"
        ) from exc
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{where}:{exc.lineno}: not valid JSON ({exc.msg}); expected an object "
            'like {"n02123045": ["tabby", "tabby cat"]}'
        ) from exc
    if not isinstance(data, _Pairs):
        raise InputError(
            f"{where}:1: the JSON must be an object mapping each label id to a name or a "
            "list of names"
        )
    out: dict[str, list[str]] = {}
    for label, value in data:
        line = _line_of(raw, json.dumps(label, ensure_ascii=False))
        items: list[Any] = (
            value if isinstance(value, list) and not isinstance(value, _Pairs) else [value]
        )
        if not label.strip() or not items or not all(isinstance(v, str) for v in items):
            raise InputError(
                f"{where}:{line}: label {label!r} must map to a name string or a non-empty "
                "list of name strings"
            )
        names = [n for v in items for n in split_names(v)]
        if not names:
            raise InputError(f"{where}:{line}: label {label!r} has no names")
        _add(out, label.strip(), names)
    return out


def _load_csv(raw: str, where: str, delimiter: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    reader = csv.reader(io.StringIO(raw, newline=""), delimiter=delimiter)
    try:
        for row in reader:
            line = reader.line_num
            cells = [c.strip() for c in row]
            if not any(cells):
                continue
            if (
                not out
                and len(cells) >= 2
                and cells[0].lower() in _HEADER_LABEL
                and cells[1].lower() in _HEADER_NAME
            ):
                continue
            if len(cells) < 2 or not cells[0]:
                raise InputError(
                    f"{where}:{line}: expected 'label{delimiter}name' "
                    f"(names may be joined with '|'), got {delimiter.join(row)!r}"
                )
            names = [n for c in cells[1:] for n in split_names(c)]
            if not names:
                raise InputError(f"{where}:{line}: label {cells[0]!r} has an empty name")
            _add(out, cells[0], names)
    except csv.Error as exc:
        raise InputError(f"{where}:{reader.line_num}: malformed CSV ({exc})") from exc
    return out


def _load_txt(raw: str, where: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line, text in enumerate(raw.splitlines(), start=1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        parts = text.strip().split(maxsplit=1)
        names = split_names(parts[1]) if len(parts) == 2 else []
        if not names:
            raise InputError(
                f"{where}:{line}: expected 'label name[, synonym...]', got {text.strip()!r}"
            )
        _add(out, parts[0], names)
    return out


def load_label_names(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Read a label names file (JSON, CSV/TSV or ImageNet-style text) into label -> names."""
    p = Path(path)
    where = str(p)
    try:
        data = p.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"label names file {where} does not exist") from exc
    except OSError as exc:
        raise InputError(f"cannot read label names file {where}: {exc}") from exc
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{where}:{line}: not UTF-8 text; save the file as UTF-8") from exc
    suffix = p.suffix.lower()
    if suffix == ".json" or (suffix not in {".csv", ".tsv", ".txt"} and raw.lstrip()[:1] == "{"):
        out = _load_json(raw, where)
    elif suffix == ".txt":
        out = _load_txt(raw, where)
    else:
        out = _load_csv(raw, where, "\t" if suffix == ".tsv" else ",")
    if not out:
        raise InputError(f"label names file {where} contains no labels")
    return out


def label_terms(
    labels: Iterable[str], names: Mapping[str, Sequence[str]] | None = None
) -> dict[str, list[str]]:
    """The terms matched for each label: its id (unless numeric), then its names/synonyms.

    A purely numeric id (``"3"``, ``"007"``) is *not* a term: it would match every ``3`` in
    every caption, file name and URL. Such a label is matched only through its names; with
    no names it gets an empty term list (logged once per call), i.e. it can never leak.
    """
    names = names or {}
    out: dict[str, list[str]] = {}
    unnamed: list[str] = []
    for label in labels:
        if label in out:
            continue
        terms: list[str] = [] if is_numeric_id(label) else [label]
        for name in names.get(label, ()):
            if name not in terms:
                terms.append(name)
        if not terms:
            unnamed.append(label)
        out[label] = terms
    if unnamed:
        log.warning(
            "%d numeric label(s) have no names and cannot be matched (e.g. %r); "
            "pass a label names file",
            len(unnamed),
            unnamed[0],
        )
    return out
