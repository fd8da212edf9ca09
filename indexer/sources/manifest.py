"""A manifest (CSV / TSV / JSONL / Parquet) listing images by ``path`` or ``url``, read in chunks."""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from splitaudit.indexer.csv_cells import csv_unescape
from splitaudit.indexer.errors import InputError
from splitaudit.indexer.extras import HF_MODULES, require_extra
from splitaudit.indexer.sources._layout import digest, json_safe, text_value
from splitaudit.indexer.sources.record import Locator, Record, Shard

logger = logging.getLogger(__name__)

CHUNK_ROWS = 10_000
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}
KNOWN_COLUMNS = ("path", "url", "key", "caption", "label", "license")
_SHARD_NAME = re.compile(r"^rows-(\d+)-(\d+)$")


def shard_name(start: int, stop: int) -> str:
    """Name of the chunk holding rows ``start`` (inclusive) to ``stop`` (exclusive)."""
    return f"rows-{start:06d}-{stop - 1:06d}"


def _columns_error(name: str, line: int | None, found: Sequence[str]) -> InputError:
    """The error for a manifest that has neither a ``path`` nor a ``url`` column."""
    where = f"{name} line {line}" if line is not None else name
    return InputError(
        f"{where}: a manifest needs a 'path' or 'url' column; found columns: "
        f"{', '.join(found) or '(none)'}"
    )


class _Pos:
    """Byte offset and line number reached by ``_utf8_lines``."""

    __slots__ = ("line", "offset")

    def __init__(self, offset: int, line: int) -> None:
        self.offset, self.line = offset, line


def _utf8_lines(fh: IO[bytes], name: str, pos: _Pos) -> Iterator[str]:
    """UTF-8 lines of a binary file from ``pos.offset``, advancing ``pos`` line by line."""
    fh.seek(pos.offset)
    for raw in fh:
        first = pos.offset == 0
        pos.offset += len(raw)
        pos.line += 1
        try:
            yield raw.decode("utf-8-sig" if first else "utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{name} line {pos.line}: not UTF-8 text ({exc.reason}); save the manifest as UTF-8"
            ) from exc


class ManifestSource:
    """Rows of a manifest; shards are chunks of ``CHUNK_ROWS`` rows (``rows-000000-009999``).

    Columns: ``path`` or ``url`` (one is required), optional ``key`` (else the ``path`` as
    written, else the ``url``), ``caption``, ``label``, ``license``; every other column is kept
    in ``metadata``. Relative paths resolve against ``root`` (default: the manifest's folder).
    A row that cannot be used (file missing, no path/url, bad JSON line, duplicate key in its
    chunk, path outside ``allowed_roots``) becomes a Record with ``error`` set; only a manifest
    that cannot be read at all (unknown format, missing columns, first JSONL line not JSON,
    bad CSV quoting, not UTF-8) raises ``InputError`` with the line number.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        root: str | os.PathLike[str] | None = None,
        allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
        chunk_rows: int = CHUNK_ROWS,
    ) -> None:
        p = Path(path).expanduser()
        if not p.exists():
            raise InputError(f"{path} does not exist")
        if not p.is_file():
            raise InputError(f"{path} is not a file")
        fmt = FORMATS.get(p.suffix.lower())
        if fmt is None:
            raise InputError(
                f"{path}: unknown manifest format {p.suffix!r}; use .csv, .tsv, .jsonl or .parquet"
            )
        self.path = p.resolve()
        self.uri = str(self.path)
        self.format = fmt
        self.base = Path(root).expanduser().resolve() if root is not None else self.path.parent
        self._base = str(self.base)
        self.allowed_roots = (
            None if allowed_roots is None else [os.path.realpath(r) for r in allowed_roots]
        )
        self.chunk_rows = chunk_rows
        self._delimiter = "\t" if fmt == "tsv" else ","
        # (byte offset, line number before it) of each chunk's first row; CSV/JSONL only.
        self._chunks: list[tuple[int, int]] | None = None
        self._rows = 0
        self._stat: tuple[int, int] | None = None
        self._header: list[str] = []
        self._check_columns()

    # -- reading -------------------------------------------------------------------------------

    def _file_stat(self) -> tuple[int, int]:
        st = self.path.stat()
        return (st.st_size, st.st_mtime_ns)

    def _check_columns(self) -> None:
        """Refuse a manifest without a ``path`` or ``url`` column (JSONL: in its first row)."""
        if self.format == "parquet":
            with self._parquet() as pf:
                names = pf.schema_arrow.names
            if "path" not in names and "url" not in names:
                raise _columns_error(self.uri, None, names)
            return
        with open(self.path, "rb") as fh:
            if self.format == "jsonl":
                for line_no, obj in self._json_objects(fh, 0, 0):
                    if isinstance(obj, Exception) or not isinstance(obj, dict):
                        raise InputError(
                            f"{self.uri} line {line_no}: the first row is not a JSON object; "
                            "a .jsonl manifest holds one JSON object per line"
                        )
                    if "path" not in obj and "url" not in obj:
                        raise _columns_error(self.uri, line_no, list(obj))
                    return
                return
            for line_no, row in self._csv_rows(fh, 0, 0):
                self._header = [c.strip() for c in row]
                if "path" not in self._header and "url" not in self._header:
                    raise _columns_error(self.uri, line_no, self._header)
                return
            raise InputError(f"{self.uri}: the manifest is empty; it needs a header row")

    def _parquet(self) -> Any:
        require_extra("hf", HF_MODULES, f"reading the Parquet manifest {self.path.name}")
        import pyarrow.parquet as pq  # lazy: pyarrow is heavy to import

        try:
            return pq.ParquetFile(self.path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants
            raise InputError(f"{self.uri}: not a readable Parquet file ({exc})") from exc

    def _csv_rows(self, fh: IO[bytes], offset: int, line: int) -> Iterator[tuple[int, list[str]]]:
        """(first line number, cells) of each non-blank CSV row from ``offset``."""
        pos = _Pos(offset, line)
        reader = csv.reader(_utf8_lines(fh, self.uri, pos), delimiter=self._delimiter)
        while True:
            start = pos.line + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise InputError(f"{self.uri} line {start}: bad CSV ({exc})") from exc
            if row and any(cell.strip() for cell in row):
                yield start, row

    def _json_objects(self, fh: IO[bytes], offset: int, line: int) -> Iterator[tuple[int, Any]]:
        """(line number, parsed object or the ``ValueError``) of each non-blank JSONL line."""
        pos = _Pos(offset, line)
        for text in _utf8_lines(fh, self.uri, pos):
            if not text.strip():
                continue
            try:
                yield pos.line, json.loads(text)
            except ValueError as exc:
                yield pos.line, exc
            except RecursionError:  # "[[[[..." deeper than the parser goes: a bad row, not a crash
                yield pos.line, ValueError("nested too deeply to be read as JSON")

    def _index(self) -> list[tuple[int, int]]:
        """Chunk start offsets of a CSV/JSONL manifest (one streaming pass, cached)."""
        current = self._file_stat()
        if self._chunks is not None and self._stat == current:
            return self._chunks
        chunks: list[tuple[int, int]] = []
        rows = 0
        with open(self.path, "rb") as fh:
            if self.format == "jsonl":
                pos = _Pos(0, 0)
                offset, line = 0, 0
                for text in _utf8_lines(fh, self.uri, pos):
                    if text.strip():
                        if rows % self.chunk_rows == 0:
                            chunks.append((offset, line))
                        rows += 1
                    offset, line = pos.offset, pos.line
            else:
                pos = _Pos(0, 0)
                reader = csv.reader(_utf8_lines(fh, self.uri, pos), delimiter=self._delimiter)
                header_seen = False
                while True:
                    offset, line = pos.offset, pos.line
                    try:
                        row = next(reader)
                    except StopIteration:
                        break
                    except csv.Error as exc:
                        raise InputError(f"{self.uri} line {line + 1}: bad CSV ({exc})") from exc
                    if not row or not any(cell.strip() for cell in row):
                        continue
                    if not header_seen:
                        header_seen = True
                        continue
                    if rows % self.chunk_rows == 0:
                        chunks.append((offset, line))
                    rows += 1
        self._chunks, self._rows, self._stat = chunks, rows, current
        return chunks

    def row_count(self) -> int:
        """Number of data rows."""
        if self.format == "parquet":
            with self._parquet() as pf:
                return int(pf.metadata.num_rows)
        self._index()
        return self._rows

    def count_hint(self) -> int:
        """The data rows (the progress total): the Parquet footer, else the line scan that
        ``shards`` needs anyway (cached, so indexing does not scan twice)."""
        return self.row_count()

    # -- Source protocol -----------------------------------------------------------------------

    def shards(self) -> Iterator[Shard]:
        """Chunks of ``chunk_rows`` rows; fingerprint = manifest size + mtime + chunk."""
        total = self.row_count()
        size, mtime = self._file_stat()
        for start in range(0, total, self.chunk_rows):
            name = shard_name(start, min(start + self.chunk_rows, total))
            yield Shard(self.uri, name, digest(size, mtime, str(self.base), name))

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one chunk, streamed."""
        match = _SHARD_NAME.match(shard.name)
        if match is None:
            raise InputError(f"{shard.name!r} is not a shard of manifest {self.uri}")
        start, stop = int(match.group(1)), int(match.group(2)) + 1
        seen: set[str] = set()
        for line_no, row_no, row in self._rows_between(start, stop):
            yield self._record(shard, line_no, row_no, row, seen)

    def _rows_between(self, start: int, stop: int) -> Iterator[tuple[int | None, int, Any]]:
        """(line number or None, row number, row dict / error) for rows ``start..stop-1``."""
        if self.format == "parquet":
            yield from self._parquet_rows(start, stop)
            return
        chunks = self._index()
        if start % self.chunk_rows or start // self.chunk_rows >= len(chunks):
            return  # a chunk of an older, longer version of the manifest
        offset, line = chunks[start // self.chunk_rows]
        row_no = start
        with open(self.path, "rb") as fh:
            if self.format == "jsonl":
                items: Iterator[tuple[int, Any]] = self._json_objects(fh, offset, line)
            else:
                items = (
                    (ln, self._csv_dict(ln, cells))
                    for ln, cells in self._csv_rows(fh, offset, line)
                )
            for line_no, row in items:
                if row_no >= stop:
                    return
                yield line_no, row_no, row
                row_no += 1

    def _csv_dict(self, line_no: int, cells: list[str]) -> dict[str, str] | Exception:
        if len(cells) > len(self._header):
            return ValueError(f"{len(cells)} fields but the header has {len(self._header)}")
        # csv_unescape: our own CSVs (a clean split) quote formula-like cells; read them back exactly.
        return dict(zip(self._header, map(csv_unescape, cells), strict=False))

    def _parquet_rows(self, start: int, stop: int) -> Iterator[tuple[int | None, int, Any]]:
        """Rows ``start..stop-1`` of a Parquet manifest, reading only the row groups that hold them."""
        with self._parquet() as pf:
            meta = pf.metadata
            groups: list[int] = []
            first_row: int | None = None
            row = 0
            for i in range(meta.num_row_groups):
                n = meta.row_group(i).num_rows
                if row + n > start and row < stop:
                    groups.append(i)
                    first_row = row if first_row is None else first_row
                row += n
            if first_row is None:
                return
            row = first_row
            for batch in pf.iter_batches(batch_size=2048, row_groups=groups):
                lo, hi = max(start - row, 0), min(stop - row, batch.num_rows)
                if hi > lo:
                    for i, item in enumerate(batch.slice(lo, hi - lo).to_pylist()):
                        yield None, row + lo + i, item
                row += batch.num_rows
                if row >= stop:
                    return

    # -- rows to records -----------------------------------------------------------------------

    def _record(
        self, shard: Shard, line_no: int | None, row_no: int, row: Any, seen: set[str]
    ) -> Record:
        where = f"line {line_no}" if line_no is not None else f"row {row_no}"
        if type(row) is not dict and (isinstance(row, Exception) or not isinstance(row, Mapping)):
            reason = row if isinstance(row, Exception) else "expected a JSON object"
            if isinstance(row, json.JSONDecodeError):
                reason = f"not valid JSON ({row.msg})"
            return self._failed(shard, where, f"{where}: {reason}")
        path, url = text_value(row.get("path")), text_value(row.get("url"))
        key = text_value(row.get("key")) or path or url
        if key is None:
            return self._failed(shard, where, f"{where}: the row has neither 'path' nor 'url'")
        metadata = {str(k): json_safe(v) for k, v in row.items() if k not in KNOWN_COLUMNS}
        fields: dict[str, Any] = {
            "url": url,
            "caption": text_value(row.get("caption")),
            "label": text_value(row.get("label")),
            "license": text_value(row.get("license")),
            "metadata": metadata,
        }
        if key in seen:
            reason = f"{where}: duplicate key {key!r} (an earlier row of this chunk has it)"
            dup_key = f"{key}#{where.replace(' ', '')}"
            return Record(
                dup_key, self.uri, shard.name, Locator(kind="none"), error=reason, **fields
            )
        seen.add(key)
        if path is None:
            assert url is not None
            return Record(key, self.uri, shard.name, Locator(kind="url", url=url), **fields)
        resolved = os.path.normpath(os.path.join(self._base, os.path.expanduser(path)))
        locator = Locator(kind="file", path=resolved)
        return Record(
            key, self.uri, shard.name, locator, error=self._path_error(resolved), **fields
        )

    def _path_error(self, resolved: str) -> str | None:
        """Why a row's file cannot be used, or ``None``."""
        if self.allowed_roots is not None:
            real = os.path.realpath(resolved)
            if not any(
                real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.allowed_roots
            ):
                return f"path not allowed: {resolved} is outside the allowed roots"
        try:
            st = os.stat(resolved)
        except FileNotFoundError:
            return f"file not found: {resolved}"
        except OSError as exc:
            return f"cannot access {resolved}: {exc.strerror or exc}"
        except ValueError:  # NUL byte in the path
            return f"invalid path: {resolved!r}"
        if not stat.S_ISREG(st.st_mode):
            return f"not a file: {resolved}"
        return None

    def _failed(self, shard: Shard, where: str, reason: str) -> Record:
        """A record for a row that could not be parsed; its key names the row."""
        return Record(
            where.replace(" ", ":"), self.uri, shard.name, Locator(kind="none"), error=reason
        )
