"""The export cache: one folder per (model id, backend, versions, recipe), written atomically.

An entry is a folder ``<root>/<backend>/<key>/`` holding the exported model files and
``meta.json`` (what was exported, with which libraries, the agreement measured against eager
torch, and the SHA-256 of every file). It is built in a temporary sibling folder and renamed
into place, so a killed export leaves no half entry. An entry whose files no longer match their
recorded digests (truncated, overwritten) is deleted and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import UsageError

logger = logging.getLogger(__name__)

META_FILE = "meta.json"
FORMAT_VERSION = 1  # bump when the export recipe changes, so old entries are not reused


@dataclass(frozen=True)
class CacheEntry:
    """A complete cache entry: its folder and its metadata."""

    path: Path
    meta: dict[str, Any]


def cache_key(
    model_id: str,
    backend: str,
    versions: Mapping[str, str],
    input_shape: tuple[int, ...],
    *,
    recipe: str = "whole",
) -> str:
    """Hex key naming an export: model id + backend + library versions + input shape + recipe.

    ``recipe`` names how the torch module was turned into the graph (e.g. the whole tower, or
    a ViT with its last block on the class token only): a different recipe is another export.
    """
    canonical = json.dumps(
        {
            "model_id": model_id,
            "backend": backend,
            "versions": dict(sorted(versions.items())),
            "input_shape": list(input_shape),
            "recipe": recipe,
            "format": FORMAT_VERSION,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


class ExportCache:
    """Exported models under ``root`` (normally ``<home>/exports``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry_dir(self, backend: str, key: str) -> Path:
        """Where the entry for ``key`` lives (whether or not it exists)."""
        return self.root / backend / key

    def load(self, backend: str, key: str) -> CacheEntry | None:
        """The entry for ``key`` if present and intact; a damaged entry is removed (returns None)."""
        path = self.entry_dir(backend, key)
        if not path.is_dir():
            return None
        problem = _check_entry(path)
        if problem is None:
            meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
            return CacheEntry(path=path, meta=meta)
        logger.warning("export cache entry %s is damaged (%s); rebuilding it", path, problem)
        self.discard(backend, key)
        return None

    def discard(self, backend: str, key: str) -> None:
        """Remove the entry for ``key`` (missing is fine)."""
        shutil.rmtree(self.entry_dir(backend, key), ignore_errors=True)

    def store(self, backend: str, key: str, build: Callable[[Path], dict[str, Any]]) -> CacheEntry:
        """Build an entry with ``build(folder) -> meta`` in a temporary folder, then rename it in.

        If another process completed the same entry meanwhile, that entry is kept.
        """
        final = self.entry_dir(backend, key)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=final.parent))
        except OSError as exc:
            raise UsageError(
                f"cannot write the model export cache under {final.parent}: {exc.strerror}; "
                "check the home folder's permissions (--home)"
            ) from exc
        try:
            meta = dict(build(tmp))
            meta["files"] = {
                p.name: _file_digest(p) for p in sorted(tmp.iterdir()) if p.name != META_FILE
            }
            _write_synced(tmp / META_FILE, json.dumps(meta, indent=2, sort_keys=True))
            for p in tmp.iterdir():
                _fsync_file(p)
            try:
                os.rename(tmp, final)
            except OSError:
                if self.load(backend, key) is None:  # not a finished concurrent writer: retry once
                    shutil.rmtree(final, ignore_errors=True)
                    os.rename(tmp, final)
            _fsync_dir(final.parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        entry = self.load(backend, key)
        if entry is None:
            raise UsageError(
                f"the model export cache under {final.parent} could not be written back"
            )
        return entry


def _check_entry(path: Path) -> str | None:
    """None if ``path`` is a complete entry whose files match ``meta.json``, else the problem."""
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {META_FILE}"
    except (OSError, ValueError) as exc:
        return f"unreadable {META_FILE}: {exc}"
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, dict):
        return f"{META_FILE} lists no files"
    for name, digest in files.items():
        target = path / name
        if not target.is_file():
            return f"{name} is missing"
        if _file_digest(target) != digest:
            return f"{name} does not match its recorded SHA-256"
    return None


def _file_digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _write_synced(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    # some filesystems cannot fsync a directory; the rename is atomic either way
    with contextlib.suppress(OSError):
        _fsync_file(path)
