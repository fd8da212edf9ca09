"""Writing output files (reports, lists, tables) with clear errors: the one place CLI outputs are written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from splitaudit.indexer.csv_cells import csv_text
from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.extras import HF_MODULES, require_extra


def write_text(path: Path, text: str) -> None:
    """Write a text output file (creating its folder); ``UsageError`` when it cannot be written."""
    _mkdir(path)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def write_table(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """Write rows as ``.parquet`` by the file's suffix, else as formula-safe CSV (``csv_cells``)."""
    if path.suffix.lower() == ".parquet":
        require_extra("hf", HF_MODULES, f"writing {path.name}")
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({c: [r.get(c) for r in rows] for c in columns})
        _mkdir(path)
        pq.write_table(table, str(path))
    else:
        write_text(path, csv_text(rows, columns))


def _mkdir(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path.parent}: {exc.strerror or exc}") from exc
