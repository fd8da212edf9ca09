"""Server-side paths: a manifest, split folder or index source must lie under a configured root."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from splitaudit.app.excerpt import excerpt
from splitaudit.indexer.errors import PathNotAllowedError, UsageError


def real_roots(roots: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The roots with symlinks resolved (what paths are compared against)."""
    return [os.path.realpath(r) for r in roots]


def is_under(path: str | os.PathLike[str], roots: Sequence[str]) -> bool:
    """True when ``path`` (symlinks resolved) is one of ``roots`` or lies inside one."""
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def resolve_under_roots(path: str, roots: Sequence[str | os.PathLike[str]], *, what: str) -> Path:
    """``path`` resolved, if it lies under one of ``roots``; ``PathNotAllowedError`` otherwise."""
    if not roots:
        raise PathNotAllowedError(
            f"this server reads no server-side paths (no SPLITAUDIT_SOURCE_ROOTS configured); "
            f"upload the {what} as an archive instead"
        )
    if not path or not os.path.isabs(path):
        raise UsageError(
            f"{what} path {excerpt(repr(path))} must be an absolute path on the server"
        )
    resolved = real_roots(roots)
    if not is_under(path, resolved):
        raise PathNotAllowedError(
            f"{what} path {excerpt(path)} is outside the server's source roots ({', '.join(resolved)}); "
            "move it under one of them or ask the admin to add a root (SPLITAUDIT_SOURCE_ROOTS)"
        )
    return Path(os.path.realpath(path))
