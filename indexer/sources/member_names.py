"""Archive member names that are not valid UTF-8: read them, keep them lossless, never crash.

Zip: a name without the UTF-8 flag is CP437 (the zip spec; ``zipfile`` already does this).
A name *flagged* UTF-8 whose bytes are not UTF-8 makes ``zipfile.ZipFile`` raise
``UnicodeDecodeError``; ``open_zip`` then reads the archive through a view that clears the
flag of exactly those entries (central directory and local headers), and ``zip_member_key``
turns their raw bytes into an escaped key. Tar (and file systems) hand undecodable bytes
over as lone surrogates (``surrogateescape``), which no database or JSON encoder accepts;
``escape_undecodable`` maps them to the same escaped form.

The escaped form: each undecodable byte as ``%XX`` and, in such a name only, ``%`` as ``%25``,
so the original bytes can always be recovered and two different names never collide.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from collections.abc import Iterable
from typing import IO, Any

_UTF8_FLAG = 0x800
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
_MAX_EOCD_SEARCH = 22 + 65535


def has_surrogates(text: str) -> bool:
    """True when ``text`` carries undecodable bytes as lone surrogates."""
    if text.isascii():  # the common case, answered in C
        return False
    try:
        text.encode("utf-8")  # any lone surrogate fails here, also in C
    except UnicodeEncodeError:
        return any("\udc80" <= ch <= "\udcff" for ch in text)
    return False


def escape_undecodable(text: str) -> str:
    """``text`` with surrogate-escaped bytes as ``%XX`` (and ``%`` as ``%25``); unchanged if none."""
    if not has_surrogates(text):
        return text
    out = []
    for ch in text:
        if "\udc80" <= ch <= "\udcff":
            out.append(f"%{ord(ch) - 0xDC00:02X}")
        elif ch == "%":
            out.append("%25")
        else:
            out.append(ch)
    return "".join(out)


def escape_undecodable_tree(value: Any) -> Any:
    """``escape_undecodable`` applied to every string (mapping keys too) in nested dicts and lists.

    What a database row or JSON column needs: lone surrogates cannot be encoded as UTF-8.
    """
    if isinstance(value, str):
        return escape_undecodable(value)
    if isinstance(value, dict):
        return {escape_undecodable_tree(k): escape_undecodable_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_undecodable_tree(v) for v in value]
    return value


def escape_bytes_name(raw: bytes) -> str:
    """A name from raw bytes: UTF-8 where valid, the rest escaped (lossless)."""
    return escape_undecodable(raw.decode("utf-8", "surrogateescape"))


class _FlagClearingFile(io.RawIOBase):
    """A read-only view of a file whose bytes at ``offsets`` have bit 3 (the UTF-8 flag's) cleared."""

    def __init__(self, path: str | os.PathLike[str], offsets: Iterable[int]) -> None:
        super().__init__()
        self._fh: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._offsets = sorted(set(offsets))
        self.name = os.fspath(path)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def read(self, size: int | None = -1) -> bytes:
        start = self._fh.tell()
        data = self._fh.read(-1 if size is None else size)
        hits = [o for o in self._offsets if start <= o < start + len(data)]
        if not hits:
            return data
        patched = bytearray(data)
        for o in hits:
            patched[o - start] &= 0xF7  # the high byte of the little-endian flag field
        return bytes(patched)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._fh.close()
        super().close()


class PatchedZipFile(zipfile.ZipFile):
    """A ``ZipFile`` over a flag-clearing view; ``escaped`` holds the CP437 names of patched entries."""

    def __init__(self, view: _FlagClearingFile, escaped: frozenset[str]) -> None:
        self._view = view
        self.escaped = escaped
        super().__init__(view)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the archive and the view under it."""
        try:
            super().close()
        finally:
            self._view.close()


def open_zip(path: str | os.PathLike[str]) -> zipfile.ZipFile:
    """``zipfile.ZipFile(path)``, also when some names are flagged UTF-8 but are not."""
    try:
        return zipfile.ZipFile(path)
    except UnicodeDecodeError:
        pass
    offsets, names = _bad_utf8_entries(path)
    view = _FlagClearingFile(path, offsets)
    try:
        return PatchedZipFile(view, frozenset(raw.decode("cp437") for raw in names))
    except BaseException:
        view.close()
        raise


def zip_member_key(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """The member's name: as stored, or escaped when it was flagged UTF-8 but is not."""
    if isinstance(zf, PatchedZipFile) and info.orig_filename in zf.escaped:
        return escape_bytes_name(info.orig_filename.encode("cp437"))
    return info.filename


def _bad_utf8_entries(path: str | os.PathLike[str]) -> tuple[list[int], list[bytes]]:
    """Flag-byte offsets (central + local header) and raw names of entries flagged UTF-8 but not UTF-8."""
    with open(path, "rb") as fh:
        fh.seek(0, io.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - _MAX_EOCD_SEARCH))
        tail = fh.read()
        at = tail.rfind(_EOCD)
        if at < 0:
            raise zipfile.BadZipFile("end of central directory not found")
        eocd_pos = size - len(tail) + at
        cd_size, cd_offset = struct.unpack("<II", tail[at + 12 : at + 20])
        cd_pos = eocd_pos - cd_size
        if cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:
            loc = tail[at - 20 : at] if at >= 20 else b""
            if not loc.startswith(_EOCD64_LOCATOR):
                raise zipfile.BadZipFile("zip64 end of central directory locator not found")
            (eocd64_pos,) = struct.unpack("<Q", loc[8:16])
            fh.seek(eocd64_pos)
            rec = fh.read(56)
            cd_size, cd_offset = struct.unpack("<QQ", rec[40:56])
            cd_pos = eocd64_pos - cd_size
        concat = cd_pos - cd_offset  # bytes prepended to the archive (self-extracting stubs)
        fh.seek(cd_pos)
        central = fh.read(cd_size)
    offsets: list[int] = []
    names: list[bytes] = []
    pos = 0
    while pos + 46 <= len(central) and central[pos : pos + 4] == _CENTRAL:
        (flags,) = struct.unpack("<H", central[pos + 8 : pos + 10])
        sizes = struct.unpack("<II", central[pos + 20 : pos + 28])
        n_len, x_len, c_len = struct.unpack("<HHH", central[pos + 28 : pos + 34])
        (local,) = struct.unpack("<I", central[pos + 42 : pos + 46])
        raw = central[pos + 46 : pos + 46 + n_len]
        if local == 0xFFFFFFFF:
            local = _zip64_local_offset(central[pos + 46 + n_len : pos + 46 + n_len + x_len], sizes)
        if flags & _UTF8_FLAG:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                names.append(raw)
                offsets.append(cd_pos + pos + 9)
                offsets.append(local + concat + 7)
        pos += 46 + n_len + x_len + c_len
    return offsets, names


def _zip64_local_offset(extra: bytes, sizes: tuple[int, int]) -> int:
    """The local header offset from a zip64 extra field (after any 64-bit sizes it also holds)."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack("<HH", extra[pos : pos + 4])
        if tag == 1:
            skip = 8 * sum(1 for v in sizes if v == 0xFFFFFFFF)
            (offset,) = struct.unpack("<Q", extra[pos + 4 + skip : pos + 12 + skip])
            return int(offset)
        pos += 4 + length
    raise zipfile.BadZipFile("zip64 entry without its local header offset")
