"""A folder of images, read recursively; class subfolders give labels (ImageFolder layout)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources._layout import (
    LayoutScan,
    decode_caption,
    digest,
    imagefolder_label,
    is_hidden,
    is_image_name,
    unsupported_image_reason,
)
from splitaudit.indexer.sources.record import Locator, Record, Shard

logger = logging.getLogger(__name__)

ROOT_SHARD = "."


class _Found(NamedTuple):
    """One file (or unreadable folder) met while walking a shard."""

    rel: str  # POSIX path relative to the source root
    path: str  # absolute path
    entry: os.DirEntry[str] | None
    caption_path: str | None
    error: str | None


def _walk(root: str, rel_dir: str, *, recursive: bool) -> Iterator[_Found]:
    """Non-hidden files under ``root/rel_dir`` in sorted order; an unreadable folder yields an error."""
    abs_dir = os.path.join(root, rel_dir) if rel_dir else root
    try:
        with os.scandir(abs_dir) as it:
            entries = sorted((e for e in it if not is_hidden(e.name)), key=lambda e: e.name)
    except OSError as exc:
        yield _Found(
            f"{rel_dir}/", abs_dir, None, None, f"cannot read directory: {exc.strerror or exc}"
        )
        return
    names = {e.name for e in entries}
    subdirs: list[os.DirEntry[str]] = []
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        try:
            # Symlinked folders are not followed (no cycles, no escaping the root).
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry)
                continue
            regular = entry.is_file()
        except OSError:
            regular = False
        # A broken symlink named like an image is still reported, so the decoder records it.
        if not regular and not (entry.is_symlink() and is_image_name(entry.name)):
            continue
        caption = None
        if is_image_name(entry.name):
            sidecar = os.path.splitext(entry.name)[0] + ".txt"
            if sidecar in names:
                caption = os.path.join(abs_dir, sidecar)
        yield _Found(rel, entry.path, entry, caption, None)
    if recursive:
        for sub in subdirs:
            yield from _walk(root, f"{rel_dir}/{sub.name}" if rel_dir else sub.name, recursive=True)


def _stat_key(found: _Found) -> tuple[int, int]:
    """(size, mtime_ns) of a found file; broken links count as (-1, -1)."""
    if found.entry is None:
        return (-1, -1)
    try:
        st = found.entry.stat()
    except OSError:
        try:
            st = found.entry.stat(follow_symlinks=False)
        except OSError:
            return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


class FolderSource:
    """Images under ``root``, recursively (extensions in ``IMAGE_EXTENSIONS``; hidden names skipped).

    Keys are POSIX paths relative to ``root``. When every image lies exactly one folder deep
    in at least two folders (``root/<class>/<file>``) the folder name is the label. A
    ``foo.txt`` next to ``foo.jpg`` is its caption. Shards are the top-level folders, plus
    ``"."`` for images directly in ``root``; a shard's fingerprint hashes the relative path,
    size and mtime of each of its files. Symlinked folders are not followed.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        path = Path(root).expanduser()
        if not path.exists():
            raise InputError(f"{root} does not exist")
        if not path.is_dir():
            raise InputError(f"{root} is not a folder")
        self.root = path.resolve()
        self.uri = str(self.root)
        self._imagefolder: bool | None = None

    @property
    def is_imagefolder(self) -> bool:
        """Whether the folder has the ImageFolder layout (decided once, by one walk)."""
        if self._imagefolder is None:
            scan = LayoutScan()
            for found in _walk(self.uri, "", recursive=True):
                if found.error is None and is_image_name(found.rel):
                    scan.add(found.rel)
                    if scan.decided_not:
                        break
            self._imagefolder = scan.is_imagefolder
            logger.debug("%s: ImageFolder layout = %s", self.uri, self._imagefolder)
        return self._imagefolder

    def _shard_walk(self, name: str) -> Iterator[_Found]:
        """Files of one shard."""
        if name == ROOT_SHARD:
            return (f for f in _walk(self.uri, "", recursive=False) if "/" not in f.rel)
        if not name or "/" in name or name in ("..", ".") or is_hidden(name):
            raise InputError(f"{name!r} is not a shard of folder source {self.uri}")
        if not os.path.isdir(os.path.join(self.uri, name)):
            return iter(())  # the shard's folder is gone: nothing to read
        return _walk(self.uri, name, recursive=True)

    def _shard_names(self) -> Iterator[str]:
        """Candidate shard names: ``"."`` then the top-level folders, sorted."""
        yield ROOT_SHARD
        try:
            with os.scandir(self.uri) as it:
                dirs = sorted(
                    e.name for e in it if not is_hidden(e.name) and e.is_dir(follow_symlinks=False)
                )
        except OSError as exc:
            raise InputError(f"cannot read folder {self.uri}: {exc.strerror or exc}") from exc
        yield from dirs

    def shards(self) -> Iterator[Shard]:
        """The shards holding at least one image (or an unreadable folder), in stable order."""
        for name in self._shard_names():
            parts: list[object] = []
            wanted = 0
            for found in self._shard_walk(name):
                if found.error is not None:
                    wanted += 1
                    parts.append((found.rel, found.error))
                    continue
                if is_image_name(found.rel) or unsupported_image_reason(found.rel):
                    wanted += 1
                parts.append((found.rel, *_stat_key(found)))
            if wanted:
                yield Shard(source=self.uri, name=name, fingerprint=digest(*parts))

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one shard, in sorted path order."""
        imagefolder = self.is_imagefolder
        for found in self._shard_walk(shard.name):
            if found.error is not None:
                yield Record(
                    key=found.rel,
                    source=self.uri,
                    shard=shard.name,
                    locator=Locator(kind="file", path=found.path),
                    error=found.error,
                )
                continue
            if not is_image_name(found.rel):
                skipped = unsupported_image_reason(found.rel)
                if skipped is not None:  # listed as unreadable, never dropped silently
                    yield Record(
                        key=found.rel,
                        source=self.uri,
                        shard=shard.name,
                        locator=Locator(kind="file", path=found.path),
                        label=imagefolder_label(found.rel) if imagefolder else None,
                        error=skipped,
                    )
                continue
            yield Record(
                key=found.rel,
                source=self.uri,
                shard=shard.name,
                locator=Locator(kind="file", path=found.path),
                caption=_read_caption(found.caption_path),
                label=imagefolder_label(found.rel) if imagefolder else None,
            )


def _read_caption(path: str | None) -> str | None:
    """Text of a caption sidecar, or ``None`` (logged) when it cannot be read."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            return decode_caption(fh.read())
    except OSError as exc:
        logger.warning("cannot read caption %s: %s", path, exc)
        return None
