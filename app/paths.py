"""Server-side paths: a manifest, split folder or index source must lie under a configured root.

So must everything a folder source links to (``check_links_under``), and a model checkpoint
named over the API (``check_model_spec``, under ``SPLITAUDIT_MODELS_ROOTS``).
"""

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


# A scan of a huge corpus folder stops here; the job re-checks every file when it reads it.
MAX_LINK_SCAN_ENTRIES = 2_000_000


def check_links_under(path: Path, roots: Sequence[str | os.PathLike[str]], *, what: str) -> None:
    """``PathNotAllowedError`` when a symlink inside folder ``path`` points outside ``roots``.

    The message names the link, never its target (nor whether the target exists).
    """
    if not path.is_dir():
        return
    resolved = real_roots(roots)
    stack, seen = [str(path)], 0
    while stack and seen < MAX_LINK_SCAN_ENTRIES:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if entry.is_symlink():
                        if not is_under(entry.path, resolved):
                            rel = os.path.relpath(entry.path, path)
                            raise PathNotAllowedError(
                                f"{what} {excerpt(str(path))} holds a symbolic link "
                                f"{excerpt(rel)} that points outside the server's source roots; "
                                "remove the link or copy the file under a root"
                            )
                    elif entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue  # unreadable folder: the index job records it as failed


def check_model_spec(spec: str, models_roots: Sequence[str | os.PathLike[str]]) -> str:
    """A model spec the API may load: a registry name, or a checkpoint under ``models_roots``.

    Every refused path gets the same message, whether it exists or not, so the API never
    tells which server paths exist.
    """
    from splitaudit.indexer.embed.spec import parse_model_spec

    parsed = parse_model_spec(spec)
    if parsed.kind in ("registry", "bundled"):
        return spec
    text = spec.strip()
    if text.startswith("local-dir:"):
        raw = text[len("local-dir:") :]
    else:
        raw = text.partition(":")[2] if parsed.kind == "weights" else text
    allowed = real_roots(models_roots)
    # As written (no ~ expansion, nothing relative), then with symlinks resolved.
    if not allowed or not os.path.isabs(raw) or not is_under(raw, allowed):
        raise PathNotAllowedError(
            f"model {excerpt(spec)} is not allowed over the API: name a registry model (e.g. "
            "ViT-B-32:laion2b_s34b_b79k, or efficientnet-lite0) or a checkpoint under the "
            "server's models roots (SPLITAUDIT_MODELS_ROOTS)"
        )
    return spec
