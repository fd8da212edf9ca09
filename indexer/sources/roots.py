"""Allowed roots: a source whose records may only name files under given folders (symlinks resolved).

Jobs submitted over the API read server-side paths that were checked at submission; the
files are re-checked here, row by row, when the job runs, so a manifest rewritten (or a
symlink swapped) after acceptance cannot make the server read anything outside the roots.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import Any

from splitaudit.indexer.errors import PathNotAllowedError
from splitaudit.indexer.sources.record import Locator, Record, Shard, Source

PATH_NOT_ALLOWED = "path not allowed"


def real_roots(roots: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The roots with symlinks resolved (what paths are compared against)."""
    return [os.path.realpath(r) for r in roots]


def is_under_roots(path: str | os.PathLike[str], roots: Sequence[str]) -> bool:
    """True when ``path`` (symlinks resolved) is one of the resolved ``roots`` or lies inside one."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):  # NUL byte, too many symlink levels
        return False
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def check_path_allowed(path: str | os.PathLike[str], roots: Sequence[str], *, what: str) -> None:
    """``PathNotAllowedError`` unless ``path`` lies under the resolved ``roots``."""
    if not is_under_roots(path, roots):
        raise PathNotAllowedError(
            f"{PATH_NOT_ALLOWED}: {what} {os.fspath(path)} is outside the allowed roots "
            f"({', '.join(roots) or 'none'}); it was moved or replaced after the job was accepted"
        )


def locator_root_error(loc: Locator, roots: Sequence[str]) -> str | None:
    """Why the bytes at ``loc`` may not be read under ``roots`` (a URL, or a file outside them), or ``None``."""
    if loc.kind == "url":
        return f"{PATH_NOT_ALLOWED}: {loc.url} is a URL; this job reads only files under its allowed roots"
    path = loc.fs_path()  # what would be opened (a non-UTF-8 name's exact bytes)
    if path is not None and not is_under_roots(path, roots):
        return f"{PATH_NOT_ALLOWED}: {loc.path} is outside the allowed roots"
    return None


class RootedSource:
    """``inner`` with every record outside ``allowed_roots`` turned into a failed record (never read)."""

    def __init__(self, inner: Source, allowed_roots: Sequence[str | os.PathLike[str]]) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.allowed_roots = real_roots(allowed_roots)

    def shards(self) -> Iterator[Shard]:
        """The inner source's shards."""
        return self.inner.shards()

    def records(self, shard: Shard) -> Iterator[Record]:
        """The inner records; those naming a URL or a file outside the roots carry ``error``."""
        for record in self.inner.records(shard):
            reason = (
                None if record.error else locator_root_error(record.locator, self.allowed_roots)
            )
            yield record if reason is None else dataclasses.replace(record, error=reason)

    def __getattr__(self, name: str) -> Any:
        # Everything else (labels, row_count, path, ...) is the inner source's.
        return getattr(self.inner, name)
