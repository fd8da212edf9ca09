"""Reading one image cell of a Parquet or Arrow file again by position (thumbnails, verification)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

# Recently read Parquet row-group columns: verification and the review UI read neighbouring
# rows one after another, and a row group is decompressed as a whole.
CACHED_GROUPS = 4
CACHED_BYTES = 256 * 1024 * 1024


@contextmanager
def open_arrow(path: str) -> Iterator[Any]:
    """A record-batch reader over an Arrow IPC file: the stream format ``datasets`` writes, or the
    random-access file format; memory-mapped, so skipping batches costs no copies."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    with pa.memory_map(path, "r") as mm:
        try:
            reader: Any = ipc.open_stream(mm)
        except pa.ArrowInvalid:
            mm.seek(0)
            file_reader = ipc.open_file(mm)
            reader = _FileBatches(file_reader)
        yield reader


class _FileBatches:
    """The random-access Arrow file reader seen as a stream reader (``schema`` + iteration)."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.schema = reader.schema

    def __iter__(self) -> Iterator[Any]:
        for i in range(self._reader.num_record_batches):
            yield self._reader.get_batch(i)


def read_cell(
    kind: Literal["parquet", "arrow"], path: str, *, unit: int, row: int, column: str
) -> bytes:
    """The image bytes at row ``row`` of row group / record batch ``unit``; ``OSError`` when gone."""
    import pyarrow as pa

    try:
        if kind == "parquet":
            values = _GROUPS.column(path, unit, column)
            cell = values[row].as_py() if row < len(values) else None
        else:
            cell = None
            with open_arrow(path) as reader:
                for i, batch in enumerate(reader):
                    if i == unit:
                        idx = batch.schema.get_field_index(column)
                        if idx >= 0 and row < batch.num_rows:
                            cell = batch.column(idx)[row].as_py()
                        break
    except (pa.ArrowException, KeyError, IndexError) as exc:
        raise OSError(f"cannot read row {row} of {path}: {exc}") from exc
    data = cell.get("bytes") if isinstance(cell, dict) else cell
    if not isinstance(data, bytes) or not data:
        raise OSError(
            f"{path}: no image bytes at {'row group' if kind == 'parquet' else 'batch'} "
            f"{unit}, row {row}, column {column!r} (the file changed)"
        )
    return data


class _RowGroupCache:
    """A small LRU of Parquet row-group columns, keyed by file identity (size + mtime) too."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self._entries, self._max_bytes = entries, max_bytes
        self._lock = threading.Lock()
        self._data: OrderedDict[tuple[object, ...], Any] = OrderedDict()

    def column(self, path: str, unit: int, column: str) -> Any:
        """Column ``column`` of row group ``unit`` (``OSError`` when the file has no such group)."""
        import pyarrow.parquet as pq

        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns, unit, column)
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        with pq.ParquetFile(path) as pf:
            if unit >= pf.metadata.num_row_groups:
                raise OSError(f"{path} has no row group {unit} (the file changed)")
            values = pf.read_row_group(unit, columns=[column]).column(column)
        with self._lock:
            self._data[key] = values
            while len(self._data) > self._entries or (
                len(self._data) > 1 and sum(v.nbytes for v in self._data.values()) > self._max_bytes
            ):
                self._data.popitem(last=False)
        return values


_GROUPS = _RowGroupCache(CACHED_GROUPS, CACHED_BYTES)
