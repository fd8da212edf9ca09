"""Atomic file writes: temp file in the same folder, fsync, rename, fsync the folder."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(dest: Path) -> Iterator[Path]:
    """Yield a temp path next to ``dest``; on success it is fsynced and renamed over ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_bytes(dest: Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(dest: Path, value: Any) -> None:
    """Write ``value`` as indented JSON to ``dest`` atomically."""
    atomic_write_bytes(dest, json.dumps(value, indent=2, sort_keys=True).encode())


def atomic_write_with(dest: Path, writer: Callable[[str], None]) -> None:
    """Let ``writer(path)`` write a temp file (e.g. ``faiss.write_index``), then move it in place."""
    with atomic_path(dest) as tmp:
        writer(str(tmp))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
