"""Reading a record's bytes: all of them, or one byte past the cap, without a cap-sized buffer."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from splitaudit.indexer.sources.record import ImageTooLargeError, Locator, read_capped


class _Stingy(io.BytesIO):
    """A stream that hands out at most 3 bytes per read and records what was asked for."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.asked: list[int] = []

    def read(self, size: int | None = -1) -> bytes:
        self.asked.append(-1 if size is None else size)
        return super().read(min(3, size if size is not None and size >= 0 else 3))


@pytest.mark.parametrize(
    ("size", "cap", "expected"), [(0, 10, 0), (5, 10, 5), (10, 10, 10), (25, 10, 11)]
)
def test_reads_everything_or_one_past_the_cap(size: int, cap: int, expected: int) -> None:
    data = bytes(range(size))
    stream = _Stingy(data)
    got = read_capped(stream, cap)
    assert got == data[:expected]
    assert max(stream.asked) <= cap + 1  # never asks for more than the cap allows


def test_reads_are_chunked_not_cap_sized(tmp_path: Path) -> None:
    stream = _Stingy(b"x" * 10)
    read_capped(stream, 512 * 1024 * 1024)
    assert max(stream.asked) == 1 << 20  # a 1 MiB chunk, not a 512 MiB buffer


def test_a_file_locator_reads_through_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"y" * 3000)
    loc = Locator(kind="file", path=str(path))
    assert loc.read_bytes() == b"y" * 3000
    # A file's size is known: over the cap it is refused before a byte is read.
    with pytest.raises(ImageTooLargeError, match="3000 bytes"):
        loc.read_bytes(max_bytes=1000)
