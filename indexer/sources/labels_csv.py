"""``key,label`` CSV files and a source wrapper that applies such labels to records."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources._layout import lookup_label
from splitaudit.indexer.sources.record import Record, Shard, Source


def parse_labels_csv(lines: Iterable[str], name: str) -> dict[str, str]:
    """Parse CSV text whose header names a ``key`` and a ``label`` column (any order, extras ignored).

    The header is required: a bare ``a.jpg,cat`` first row could as well be a header with
    other names, and guessing would silently drop or invent a label.
    """
    reader = csv.reader(lines)
    labels: dict[str, str] = {}
    cols: tuple[int, int] | None = None
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if cols is None:
                header = [cell.strip().lower() for cell in row]
                if "key" not in header or "label" not in header:
                    raise InputError(
                        f"{name} line {line}: a labels file needs a header row naming columns "
                        f"'key' and 'label'; found: {', '.join(row)}"
                    )
                cols = (header.index("key"), header.index("label"))
                continue
            if len(row) <= max(cols):
                raise InputError(
                    f"{name} line {line}: expected 'key,label', got {len(row)} column(s)"
                )
            key, label = row[cols[0]].strip(), row[cols[1]].strip()
            if not key:
                raise InputError(f"{name} line {line}: empty key")
            if key in labels and labels[key] != label:
                raise InputError(
                    f"{name} line {line}: key {key!r} has two labels ({labels[key]!r}, {label!r})"
                )
            labels[key] = label
    except csv.Error as exc:
        raise InputError(f"{name} line {reader.line_num}: not a valid CSV file ({exc})") from exc
    return labels


def load_labels_csv(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a ``key,label`` CSV file into a dict; ``InputError`` names the bad line."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist") from exc
    except OSError as exc:
        raise InputError(f"cannot read labels file {path}: {exc.strerror or exc}") from exc
    return parse_labels_bytes(data, str(path))


def parse_labels_bytes(data: bytes, name: str) -> dict[str, str]:
    """Parse the bytes of a ``key,label`` CSV file (UTF-8, optional BOM)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc.reason}); save it as UTF-8 CSV") from exc
    labels = parse_labels_csv(io.StringIO(text, newline=""), name)
    if not labels:
        raise InputError(f"{name}: no 'key,label' rows found")
    return labels


class LabelledSource:
    """Wraps a source and sets each record's label from a ``key,label`` mapping.

    A key matches exactly, else by file name, else by file stem; records without a match
    keep the label their source gave them.
    """

    def __init__(self, inner: Source, labels: Mapping[str, str]) -> None:
        self.inner = inner
        self.labels = dict(labels)
        self.uri = inner.uri

    def shards(self) -> Iterator[Shard]:
        """The wrapped source's shards."""
        return self.inner.shards()

    def records(self, shard: Shard) -> Iterator[Record]:
        """The wrapped source's records, relabelled."""
        for record in self.inner.records(shard):
            label = lookup_label(self.labels, record.key)
            yield record if label is None else dataclasses.replace(record, label=label)
