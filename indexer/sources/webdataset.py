"""WebDataset tar shards as written by img2dataset: ``{key}.jpg`` + ``{key}.json`` / ``{key}.txt``."""

from __future__ import annotations

import json
import logging
import os
import posixpath
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources._layout import (
    IMAGE_EXTENSIONS,
    decode_caption,
    digest,
    json_safe,
    text_value,
)
from splitaudit.indexer.sources.record import Locator, Record, Shard

logger = logging.getLogger(__name__)

IMAGE_EXTS = frozenset(ext.lstrip(".") for ext in IMAGE_EXTENSIONS)
COMPRESSED_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar.zst")
# Fields of img2dataset's .json that become Record fields; the rest stays metadata.
_FIELD_KEYS = frozenset({"caption", "url", "license", "LICENSE"})
_MAX_SIDECAR_BYTES = 16 * 1024 * 1024


def split_member_name(name: str) -> tuple[str, str] | None:
    """WebDataset's ``(__key__, extension)`` of a member: the key ends at the file name's first dot."""
    name = name[2:] if name.startswith("./") else name
    dirname, base = posixpath.split(name)
    if not base or base.startswith(".") or "." not in base:
        return None
    stem, ext = base.split(".", 1)
    return (posixpath.join(dirname, stem) if dirname else stem), ext.lower()


def is_compressed_tar(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is named or starts like a compressed tar (gzip, bzip2, xz, zstd)."""
    if str(path).lower().endswith(COMPRESSED_SUFFIXES):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError:
        return False
    return head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd"))


def _compressed_error(path: str | os.PathLike[str]) -> InputError:
    return InputError(
        f"{path} is a compressed tar; WebDataset shards must be uncompressed .tar files "
        "(images are read with one seek): decompress it first, e.g. `gunzip -k FILE`"
    )


def iter_members(tf: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Members of an open tar, one at a time, without keeping them all in ``tf.members``."""
    while True:
        member = tf.next()
        if member is None:
            return
        yield member
        tf.members = []  # type: ignore[attr-defined]  # keep memory flat on big shards


@dataclass
class _Sample:
    """The members of one ``__key__`` met so far."""

    key: str
    first: tarfile.TarInfo
    image: tarfile.TarInfo | None = None
    json_bytes: bytes | None = None
    txt: bytes | None = None
    cls: bytes | None = None
    extra: list[str] = field(default_factory=list)


def _read_member(tf: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    fh = tf.extractfile(member)
    return b"" if fh is None else fh.read(_MAX_SIDECAR_BYTES)


def iter_samples(tf: tarfile.TarFile) -> Iterator[_Sample]:
    """Samples of an open uncompressed tar: consecutive members sharing a ``__key__``."""
    current: _Sample | None = None
    for member in iter_members(tf):
        parsed = split_member_name(member.name) if member.isfile() else None
        if parsed is None:
            continue
        key, ext = parsed
        if current is not None and current.key != key:
            yield current
            current = None
        if current is None:
            current = _Sample(key=key, first=member)
        if ext in IMAGE_EXTS and current.image is None:
            current.image = member
        elif ext == "json":
            current.json_bytes = _read_member(tf, member)
        elif ext == "txt":
            current.txt = _read_member(tf, member)
        elif ext == "cls":
            current.cls = _read_member(tf, member)
        else:
            current.extra.append(ext)
    if current is not None:
        yield current


def _is_tar_shard(path: Path) -> bool:
    """A visible ``*.tar`` file."""
    return path.name.endswith(".tar") and not path.name.startswith(".") and path.is_file()


class WebDatasetSource:
    """img2dataset-style WebDataset shards; one shard per ``.tar`` (a folder: all its tars, sorted).

    A sample's members must be consecutive in the tar (WebDataset's rule). The key is the
    WebDataset ``__key__``. Caption: the ``.txt``, else the ``.json`` ``caption``; label: the
    ``.cls``; ``url`` / ``license`` from the ``.json``, every other ``.json`` field kept as metadata.
    """

    def __init__(
        self, paths_or_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
    ) -> None:
        if isinstance(paths_or_dir, str | os.PathLike):
            p = Path(paths_or_dir).expanduser()
            if not p.exists():
                raise InputError(f"{paths_or_dir} does not exist")
            if p.is_dir():
                base = p.resolve()
                tars = sorted(c for c in base.iterdir() if _is_tar_shard(c))
                if not tars:
                    compressed = [
                        c for c in base.iterdir() if c.name.lower().endswith(COMPRESSED_SUFFIXES)
                    ]
                    if compressed:
                        raise _compressed_error(compressed[0])
                    raise InputError(f"{paths_or_dir} holds no .tar shards")
                self.uri = str(base)
            else:
                tars = [p.resolve()]
                base = tars[0].parent
                self.uri = str(tars[0])
        else:
            tars = [Path(t).expanduser().resolve() for t in paths_or_dir]
            if not tars:
                raise InputError("no WebDataset shards given")
            for t in tars:
                if not t.is_file():
                    raise InputError(f"{t} does not exist or is not a file")
            base = Path(os.path.commonpath([t.parent for t in tars]))
            self.uri = str(base)
        for t in tars:
            if t.name.lower().endswith(COMPRESSED_SUFFIXES):
                raise _compressed_error(t)
        self._tars = {t.relative_to(base).as_posix(): t for t in tars}

    def count_hint(self) -> int:
        """The samples of every tar (the progress total): a scan of the member headers only
        (an uncompressed tar is seeked over, no image or sidecar is read)."""
        total = 0
        for path in self._tars.values():
            with tarfile.open(path, "r:") as tf:
                last: str | None = None
                for member in iter_members(tf):
                    parsed = split_member_name(member.name) if member.isfile() else None
                    if parsed is not None and parsed[0] != last:
                        total, last = total + 1, parsed[0]
        return total

    def shards(self) -> Iterator[Shard]:
        """One shard per tar; fingerprint = the tar's size + mtime."""
        for name, path in self._tars.items():
            st = path.stat()
            yield Shard(self.uri, name, digest(st.st_size, st.st_mtime_ns))

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one tar, streamed member by member."""
        path = self._tars.get(shard.name)
        if path is None:
            raise InputError(f"{shard.name!r} is not a shard of {self.uri}")
        if is_compressed_tar(path):
            raise _compressed_error(path)
        seen: set[str] = set()
        offset = 0  # end of the last sample read whole
        try:
            with tarfile.open(path, "r:") as tf:
                for sample in iter_samples(tf):
                    yield self._record(str(path), shard.name, sample, seen)
                    offset = tf.offset
        except (tarfile.TarError, EOFError, OSError) as exc:
            yield Record(
                key=f"<unreadable tar data after offset {offset}>",
                source=self.uri,
                shard=shard.name,
                locator=Locator(kind="tar", path=str(path), offset=offset, size=0),
                error=f"tar shard {shard.name} is corrupt or truncated after offset {offset}: {exc}",
            )

    def _record(self, tar_path: str, shard: str, sample: _Sample, seen: set[str]) -> Record:
        meta: dict[str, Any] = {}
        if sample.json_bytes is not None:
            try:
                parsed = json.loads(sample.json_bytes)
                meta = parsed if isinstance(parsed, dict) else {"json": parsed}
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
                meta = {"json_error": f"{sample.key}.json is not valid JSON: {exc}"}
        caption = decode_caption(sample.txt) if sample.txt is not None else None
        metadata = {k: json_safe(v) for k, v in meta.items() if k not in _FIELD_KEYS}
        fields: dict[str, Any] = {
            "url": text_value(meta.get("url")),
            "caption": caption or text_value(meta.get("caption")),
            "label": decode_caption(sample.cls) if sample.cls is not None else None,
            "license": text_value(meta.get("license") or meta.get("LICENSE")),
            "metadata": metadata,
        }
        key, error = sample.key, None
        member = sample.image or sample.first
        if sample.key in seen:
            key = f"{sample.key}@{sample.first.offset}"
            error = (
                f"duplicate key {sample.key!r} in shard {shard}: "
                "a sample's files must be consecutive in a WebDataset tar"
            )
        elif sample.image is None:
            error = f"no image for key {sample.key!r} in shard {shard}"
        seen.add(sample.key)
        locator = Locator.tar_member(tar_path, member)
        return Record(key, self.uri, shard, locator, error=error, **fields)


def looks_like_webdataset(path: str | os.PathLike[str], *, probe: int = 64) -> bool:
    """True when the first ``probe`` members of an uncompressed tar pair images with ``.json``/``.txt``.

    ``.json`` pairs are enough; ``.txt`` pairs count only when names are flat (no folders),
    since an ImageFolder archive may carry ``.txt`` captions next to its images.
    """
    if is_compressed_tar(path):
        return False
    try:
        with tarfile.open(path, "r:") as tf:
            seen = 0
            flat = True
            pairs: dict[str, set[str]] = {}
            for member in iter_members(tf):
                seen += 1
                if seen > probe:
                    break
                parsed = split_member_name(member.name) if member.isfile() else None
                if parsed is None:
                    continue
                flat = flat and "/" not in parsed[0]
                exts = pairs.setdefault(parsed[0], set())
                exts.add("image" if parsed[1] in IMAGE_EXTS else parsed[1])
    except (tarfile.TarError, EOFError, OSError):
        return False
    has_image = [exts for exts in pairs.values() if "image" in exts]
    return any("json" in e for e in has_image) or (flat and any("txt" in e for e in has_image))
