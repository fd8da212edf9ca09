"""Records: one image of a source, with how to find its bytes again and how to cite it."""

from __future__ import annotations

import io
import os
import tarfile
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# A locator kind is a name in ``LOCATOR_KINDS`` (built in: file, tar, zip, url, parquet, arrow,
# none); a source format adds its own with ``register_locator_kind`` (via ``sources.registry``).
LocatorKind = str
LOCATOR_FIELDS = ("kind", "path", "offset", "size", "member", "url", "raw_path")


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
        spec = LOCATOR_KINDS.get(self.kind)
        return "" if spec is None else spec.uri(self)

    def read_bytes(self, *, timeout: float = 30.0, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
        """Read the image bytes; raises ``OSError`` (or subclasses) when they are gone.

        Sizes known before reading (a file's, a tar or zip member's) are checked first: an
        oversized (or sparse) file is refused without a byte of it in memory.
        """
        spec = LOCATOR_KINDS.get(self.kind)
        if spec is None or spec.read is None:
            raise OSError("no bytes available for this record (no file, shard member or URL)")
        return spec.read(self, timeout, max_bytes)

    def to_dict(self) -> dict[str, object]:
        """The locator as a JSON dict (None fields dropped), what ``from_dict`` reads back.

        A file name that is not UTF-8 is stored ``%XX``-escaped (for display and JSON) plus its
        exact bytes as hex in ``raw_path``, which ``read_bytes`` opens.
        """
        from splitaudit.indexer.sources.member_names import has_surrogates

        out = {name: getattr(self, name) for name in LOCATOR_FIELDS}
        if self.path is not None and self.raw_path is None and has_surrogates(self.path):
            out["raw_path"] = os.fsencode(self.path).hex()
        return {k: v for k, v in out.items() if v is not None}

    @staticmethod
    def from_dict(stored: Mapping[str, Any]) -> Locator:
        """The locator a stored dict (``to_dict``) describes; unknown keys are ignored.

        ``TypeError`` when ``kind`` is missing.
        """
        return Locator(**{k: stored[k] for k in LOCATOR_FIELDS if k in stored})

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


@dataclass(frozen=True, slots=True)
class LocatorKindSpec:
    """How a locator of one kind is shown (``uri``) and read back (``read``: None = no bytes).

    ``local``: the bytes are read from this machine's files (never fetched over the network).
    """

    kind: str
    uri: Callable[[Locator], str]
    read: Callable[[Locator, float, int], bytes] | None = None
    local: bool = True


LOCATOR_KINDS: dict[str, LocatorKindSpec] = {}


def register_locator_kind(spec: LocatorKindSpec) -> None:
    """Make ``spec.kind`` known to ``Locator.uri`` / ``read_bytes`` (replacing one of that name)."""
    LOCATOR_KINDS[spec.kind] = spec


def _read_file(loc: Locator, _timeout: float, max_bytes: int) -> bytes:
    assert loc.path is not None
    with open(str(loc.fs_path()), "rb") as fh:
        check_image_size(os.fstat(fh.fileno()).st_size, max_bytes)
        return read_capped(fh, max_bytes)


def _read_tar(loc: Locator, _timeout: float, max_bytes: int) -> bytes:
    assert loc.path is not None and loc.offset is not None and loc.size is not None
    check_image_size(loc.size, max_bytes)
    with open(str(loc.fs_path()), "rb") as fh:
        fh.seek(loc.offset)
        data = fh.read(loc.size)
    if len(data) != loc.size:
        raise OSError(f"tar member truncated: wanted {loc.size} bytes, got {len(data)}")
    return data


def _read_zip(loc: Locator, _timeout: float, max_bytes: int) -> bytes:
    assert loc.path is not None and loc.member is not None
    from splitaudit.indexer.sources.member_names import open_zip

    with open_zip(loc.path) as zf:
        check_image_size(zf.getinfo(loc.member).file_size, max_bytes)
        with zf.open(loc.member) as fh:
            return read_capped(fh, max_bytes)


def _read_url(loc: Locator, timeout: float, max_bytes: int) -> bytes:
    assert loc.url is not None
    if not loc.url.startswith(("http://", "https://")):
        raise OSError(f"unsupported URL scheme: {loc.url}")
    with urllib.request.urlopen(loc.url, timeout=timeout) as resp:
        return read_capped(resp, max_bytes)


def _read_cell(loc: Locator, _timeout: float, _max_bytes: int) -> bytes:
    from splitaudit.indexer.sources.hf_cells import read_cell  # lazy: pyarrow is heavy

    assert loc.path is not None and loc.offset is not None and loc.size is not None
    assert loc.member is not None
    kind: Literal["parquet", "arrow"] = "parquet" if loc.kind == "parquet" else "arrow"
    return read_cell(kind, loc.path, unit=loc.offset, row=loc.size, column=loc.member)


def _cell_uri(loc: Locator) -> str:
    unit = "row_group" if loc.kind == "parquet" else "batch"
    return f"{loc.path}#{unit}={loc.offset}&row={loc.size}&column={loc.member}"


for _spec in (
    LocatorKindSpec("file", lambda loc: str(loc.path), _read_file),
    LocatorKindSpec(
        "tar", lambda loc: f"{loc.path}#offset={loc.offset}&size={loc.size}", _read_tar
    ),
    LocatorKindSpec("zip", lambda loc: f"{loc.path}#{loc.member}", _read_zip),
    LocatorKindSpec("url", lambda loc: str(loc.url), _read_url, local=False),
    LocatorKindSpec("parquet", _cell_uri, _read_cell),
    LocatorKindSpec("arrow", _cell_uri, _read_cell),
    LocatorKindSpec("none", lambda loc: "", None, local=False),
):
    register_locator_kind(_spec)


def open_bytes(data: bytes) -> io.BytesIO:
    """A seekable file object over ``data`` (for PIL)."""
    return io.BytesIO(data)
