"""Streaming ``multipart/form-data`` reader: file parts go straight to disk under a byte limit.

FastAPI's ``UploadFile`` spools the whole body before the endpoint runs; here the body is
read chunk by chunk, so an upload over the limit is refused with 413 after at most the
limit has been written (and at once when ``Content-Length`` already says too much).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from splitaudit.indexer.errors import InputError, UploadTooLargeError

MAX_FIELD_BYTES = 1024 * 1024
MAX_PARTS = 64
_SAFE_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")


@dataclass(frozen=True, slots=True)
class SavedFile:
    """A file part written to disk."""

    field: str
    filename: str
    path: Path
    size: int


@dataclass
class ReceivedForm:
    """The fields (text) and files (on disk) of a multipart body."""

    fields: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    files: dict[str, list[SavedFile]] = field(default_factory=lambda: defaultdict(list))


def too_large(limit: int) -> UploadTooLargeError:
    """The error for a body over ``limit`` bytes."""
    return UploadTooLargeError(
        f"upload exceeds the limit of {limit / 1024 / 1024:.0f} MB (SPLITAUDIT_MAX_UPLOAD_MB); "
        "split it into smaller archives, or put the split on the server and POST a manifest path"
    )


def check_declared_length(request: Request, limit: int) -> None:
    """Refuse a body whose ``Content-Length`` is over ``limit`` before reading any of it."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)


class _Collector:
    """python-multipart callbacks that fill a ``ReceivedForm``."""

    def __init__(self, dest: Path, form: ReceivedForm) -> None:
        self.dest = dest
        self.form = form
        self.parts = 0
        self._header_name = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._name = ""
        self._filename: str | None = None
        self._data = bytearray()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._size = 0

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise InputError(f"too many form parts (more than {MAX_PARTS})")
        self._headers, self._data, self._size = {}, bytearray(), 0

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._header_name.lower()] = self._header_value
        self._header_name, self._header_value = b"", b""

    def on_headers_finished(self) -> None:
        _disposition, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        if b"name" not in options:
            raise InputError("a form part has no name in its Content-Disposition header")
        self._name = options[b"name"].decode("utf-8", "replace")
        self._filename = None
        if b"filename" in options:
            self._filename = options[b"filename"].decode("utf-8", "replace")
            suffix = Path(self._filename).suffix.lower()
            suffix = suffix if _SAFE_SUFFIX.match(suffix) else ".bin"
            self._path = (
                self.dest
                / f"part{self.parts:02d}-{re.sub(r'[^a-z0-9_]', '_', self._name[:40])}{suffix}"
            )
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed in on_part_end / close()

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if self._file is not None:
            self._file.write(chunk)
            self._size += len(chunk)
            return
        if len(self._data) + len(chunk) > MAX_FIELD_BYTES:
            raise InputError(
                f"form field {self._name!r} is over {MAX_FIELD_BYTES // 1024} KB; send it as a file"
            )
        self._data.extend(chunk)

    def on_part_end(self) -> None:
        if self._file is not None:
            assert self._path is not None
            self._file.close()
            self._file = None
            self.form.files[self._name].append(
                SavedFile(self._name, self._filename or "", self._path, self._size)
            )
            return
        try:
            text = self._data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"form field {self._name!r} is not UTF-8 text") from exc
        self.form.fields[self._name].append(text)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


async def receive_multipart(request: Request, dest: Path, *, max_bytes: int) -> ReceivedForm:
    """Parse a ``multipart/form-data`` body into ``dest`` (an existing folder the caller owns).

    Raises ``UploadTooLargeError`` once more than ``max_bytes`` of body arrive, and
    ``InputError`` for a malformed body. The caller deletes ``dest`` on error.
    """
    check_declared_length(request, max_bytes)
    _ctype, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if not boundary:
        raise InputError(
            "multipart/form-data request without a boundary; let your HTTP client build the body"
        )
    form = ReceivedForm()
    collector = _Collector(dest, form)
    callbacks = {
        "on_part_begin": collector.on_part_begin,
        "on_part_data": collector.on_part_data,
        "on_part_end": collector.on_part_end,
        "on_header_field": collector.on_header_field,
        "on_header_value": collector.on_header_value,
        "on_header_end": collector.on_header_end,
        "on_headers_finished": collector.on_headers_finished,
    }
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_bytes:
                raise too_large(max_bytes)
            parser.write(chunk)
        parser.finalize()
    except FormParserError as exc:
        raise InputError(f"malformed multipart body: {exc}") from exc
    finally:
        collector.close()
    if collector.parts == 0:
        raise InputError("empty multipart body: send the split archive as the 'split' field")
    return form
