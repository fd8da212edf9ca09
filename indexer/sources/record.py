"""Records: one image of a source, with how to find its bytes again and how to cite it."""

from __future__ import annotations

import io
import os
import tarfile
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

LocatorKind = Literal["file", "tar", "zip", "url", "parquet", "arrow", "none"]


_CHUNK = 1 << 20
MAX_IMAGE_BYTES = 512 * 1024 * 1024


class ImageTooLargeError(OSError):
    """An image file (or member) is larger than one image may be; refused before reading."""


def check_image_size(size: int | None, max_bytes: int) -> None:
    """``ImageTooLargeError`` when a stored size is over ``max_bytes`` (checked before reading)."""
    if size is not None and size > max_bytes:
        raise ImageTooLargeError(
            f"{size} bytes, over the {max_bytes / 2**20:g} MiB limit for one image: refused "
            "without reading it"
        )


def read_capped(fh: Any, max_bytes: int) -> bytes:
    """All of ``fh``, or its first ``max_bytes + 1`` bytes (so the caller sees it is too big).

    ``fh.read(max_bytes + 1)`` would be shorter to write, but file and HTTP readers allocate
    (and HTTP zero-fills) a buffer of the requested size: 512 MiB per image by default.
    """
    parts: list[bytes] = []
    left = max_bytes + 1
    while left > 0:
        part = fh.read(min(_CHUNK, left))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


@dataclass(frozen=True, slots=True)
class Locator:
    """Where an image's bytes live.

    ``file``: ``path``. ``tar``: ``path`` of the tar + ``offset`` of the member's data + ``size``
    (read with one seek, no tar parsing). ``zip``: ``path`` of the zip + ``member`` name.
    ``url``: ``url`` (fetched over HTTP). ``parquet``: a cell of a Hugging Face Parquet file:
    ``path`` + row group (``offset``) + row inside it (``size``) + image column (``member``).
    ``arrow``: the same in an Arrow IPC file (``save_to_disk``), ``offset`` = record batch.
    ``none``: the bytes are not available (e.g. a precomputed-embedding row without a shard).
    """

    kind: LocatorKind
    path: str | None = None
    offset: int | None = None
    size: int | None = None
    member: str | None = None
    url: str | None = None
    # The exact bytes of ``path`` (hex of ``os.fsencode``) when the name is not UTF-8: ``path``
    # is then its %XX-escaped display form, and this is what is opened.
    raw_path: str | None = None

    def fs_path(self) -> str | None:
        """The path to open: the lossless bytes when stored, else ``path``."""
        if self.raw_path:
            try:
                return os.fsdecode(bytes.fromhex(self.raw_path))
            except ValueError:
                return self.path
        return self.path

    def uri(self) -> str:
        """A compact human-readable address, stored in the DB ``uri`` column."""
        if self.kind == "file":
            return str(self.path)
        if self.kind == "tar":
            return f"{self.path}#offset={self.offset}&size={self.size}"
        if self.kind == "zip":
            return f"{self.path}#{self.member}"
        if self.kind == "url":
            return str(self.url)
        if self.kind in ("parquet", "arrow"):
            unit = "row_group" if self.kind == "parquet" else "batch"
            return f"{self.path}#{unit}={self.offset}&row={self.size}&column={self.member}"
        return ""

    def read_bytes(self, *, timeout: float = 30.0, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
        """Read the image bytes; raises ``OSError`` (or subclasses) when they are gone.

        Sizes known before reading (a file's, a tar or zip member's) are checked first: an
        oversized (or sparse) file is refused without a byte of it in memory.
        """
        if self.kind == "file":
            assert self.path is not None
            with open(str(self.fs_path()), "rb") as fh:
                check_image_size(os.fstat(fh.fileno()).st_size, max_bytes)
                return read_capped(fh, max_bytes)
        if self.kind == "tar":
            assert self.path is not None and self.offset is not None and self.size is not None
            check_image_size(self.size, max_bytes)
            with open(str(self.fs_path()), "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(self.size)
            if len(data) != self.size:
                raise OSError(f"tar member truncated: wanted {self.size} bytes, got {len(data)}")
            return data
        if self.kind == "zip":
            assert self.path is not None and self.member is not None
            from splitaudit.indexer.sources.member_names import open_zip

            with open_zip(self.path) as zf:
                check_image_size(zf.getinfo(self.member).file_size, max_bytes)
                with zf.open(self.member) as fh:
                    return read_capped(fh, max_bytes)
        if self.kind == "url":
            assert self.url is not None
            if not self.url.startswith(("http://", "https://")):
                raise OSError(f"unsupported URL scheme: {self.url}")
            with urllib.request.urlopen(self.url, timeout=timeout) as resp:
                return read_capped(resp, max_bytes)
        if self.kind in ("parquet", "arrow"):
            from splitaudit.indexer.sources.hf_cells import (
                read_cell,
            )  # lazy: pyarrow is heavy to import

            assert self.path is not None and self.offset is not None and self.size is not None
            assert self.member is not None
            return read_cell(
                self.kind, self.path, unit=self.offset, row=self.size, column=self.member
            )
        raise OSError("no bytes available for this record (no file, shard member or URL)")

    @staticmethod
    def tar_member(tar_path: str, member: tarfile.TarInfo) -> Locator:
        """Locator of a regular member of an uncompressed tar file."""
        return Locator(kind="tar", path=tar_path, offset=member.offset_data, size=member.size)


@dataclass(frozen=True, slots=True)
class Record:
    """One image of a corpus source or a test split.

    ``key`` is stable within its shard: the path relative to a folder source's root, a
    manifest's ``key`` (else its ``path``/``url``), or a WebDataset ``__key__``.
    ``error`` is set when the source itself already knows the record is bad (e.g. a
    WebDataset ``.json`` without its image, a manifest row pointing nowhere); such records
    are stored as failed items with that reason. ``data`` holds the bytes when the source
    read them already (a Parquet row); the locator still finds them again later.
    """

    key: str
    source: str
    shard: str
    locator: Locator
    url: str | None = None
    caption: str | None = None
    label: str | None = None
    license: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    data: bytes | None = field(default=None, repr=False, compare=False)

    def read_bytes(self) -> bytes:
        """The image bytes: those read with the record, else via the locator."""
        if self.data is not None:
            return self.data
        return self.locator.read_bytes()


@dataclass(frozen=True, slots=True)
class Shard:
    """A resumable unit of indexing work inside a source.

    ``fingerprint`` changes when the shard's content changes (file count + sizes + mtimes,
    or the tar's size + mtime), so a finished shard is re-scanned only when it changed.
    """

    source: str
    name: str
    fingerprint: str


class Source(Protocol):
    """A corpus source or split: shards, and the records of one shard."""

    uri: str

    def shards(self) -> Iterator[Shard]:
        """The shards, in a stable order."""
        ...

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one shard, streamed (never the whole corpus in memory)."""
        ...


def open_bytes(data: bytes) -> io.BytesIO:
    """A seekable file object over ``data`` (for PIL)."""
    return io.BytesIO(data)
