"""A zip archive of a folder, produced while it is read: uploads start at once, nothing hits disk."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources import is_hidden, is_image_name

READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class FolderFile:
    """One file to pack: absolute path, name inside the archive, size in bytes."""

    path: Path
    arcname: str
    size: int


def folder_files(root: Path) -> list[FolderFile]:
    """Regular, non-hidden files under ``root`` in sorted order (symlinked folders are not followed)."""
    root = Path(root)
    found: list[FolderFile] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        dirnames[:] = sorted(d for d in dirnames if not is_hidden(d))
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if is_hidden(rel):
                continue
            path = Path(dirpath) / name
            try:
                size = path.stat().st_size  # follows a file symlink: its target is packed
            except OSError:
                continue  # broken link: nothing to send; the server would only record it as missing
            if path.is_file():
                found.append(FolderFile(path=path, arcname=rel, size=size))
    return found


class _Sink(io.RawIOBase):
    """A write-only, unseekable buffer that ``zipfile`` writes into and the reader drains."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.position = 0

    def writable(self) -> bool:
        """Always: this is where the zip is written."""
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        """Buffer ``data`` until the reader drains it."""
        self.buffer += data
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        """Bytes written so far (zipfile records member offsets with it)."""
        return self.position

    def drain(self) -> bytes:
        """The bytes written since the last drain."""
        data = bytes(self.buffer)
        self.buffer.clear()
        return data


class ZipStream(io.RawIOBase):
    """A readable stream of the zip of ``files``; ``on_read(n)`` reports source bytes consumed.

    Images are stored (already compressed); other files are deflated. ``zipfile`` writes
    data descriptors when its output cannot seek, which every unzip tool reads.
    """

    def __init__(
        self, files: list[FolderFile], *, on_read: Callable[[int], object] | None = None
    ) -> None:
        self._chunks = self._generate(files)
        self._pending = b""
        self._on_read = on_read
        self._done = False

    def readable(self) -> bool:
        """Always: the zip is read from here."""
        return True

    def _generate(self, files: list[FolderFile]) -> Iterator[bytes]:
        """Zip bytes in chunks of about ``READ_CHUNK``, written while the files are read."""
        sink = _Sink()
        with zipfile.ZipFile(sink, "w", allowZip64=True) as zf:
            for f in files:
                info = zipfile.ZipInfo.from_file(f.path, f.arcname)
                info.compress_type = (
                    zipfile.ZIP_STORED if is_image_name(f.arcname) else zipfile.ZIP_DEFLATED
                )
                try:
                    with (
                        open(f.path, "rb") as src,
                        zf.open(info, "w", force_zip64=f.size > 1 << 31) as dst,
                    ):
                        while chunk := src.read(READ_CHUNK):
                            dst.write(chunk)
                            if self._on_read is not None:
                                self._on_read(len(chunk))
                            if len(sink.buffer) >= READ_CHUNK:
                                yield sink.drain()
                except OSError as exc:
                    raise InputError(
                        f"cannot read {f.path} while packing the split: {exc.strerror or exc}"
                    ) from exc
                yield sink.drain()
        yield sink.drain()

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        """Fill ``buffer`` with the next zip bytes; 0 at the end."""
        while not self._pending and not self._done:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                self._done = True
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n
