"""Zip / tar archives (uploaded test splits): refuse unsafe members, unpack with limits, read in place."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NamedTuple

from splitaudit.indexer.errors import InputError, UnsafeArchiveError
from splitaudit.indexer.sources._layout import (
    LayoutScan,
    decode_caption,
    digest,
    imagefolder_label,
    is_hidden,
    is_image_name,
    lookup_label,
)
from splitaudit.indexer.sources.labels_csv import parse_labels_bytes
from splitaudit.indexer.sources.member_names import escape_undecodable, open_zip, zip_member_key
from splitaudit.indexer.sources.record import Locator, Record, Shard
from splitaudit.indexer.sources.webdataset import is_compressed_tar, iter_members

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 8 * 1024**3
DEFAULT_MAX_MEMBERS = 1_000_000
_COPY_CHUNK = 1024 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")


def archive_kind(path: str | os.PathLike[str]) -> str | None:
    """``"zip"``, ``"tar"`` (any compression) or ``None``, from the file's contents."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    try:
        if tarfile.is_tarfile(path):
            return "tar"
    except (OSError, EOFError, zlib.error):
        return None
    return "zip" if zipfile.is_zipfile(path) else None


def safe_member_name(name: str) -> str:
    """The member's normalised POSIX path; ``UnsafeArchiveError`` for absolute paths or ``..``."""
    posix = name.replace("\\", "/")
    if posix.startswith("/") or _DRIVE.match(posix):
        raise UnsafeArchiveError(
            f"archive member {name!r} has an absolute path; the archive is refused"
        )
    parts = [p for p in posix.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"archive member {name!r} contains '..'; the archive is refused")
    if "\x00" in posix:
        raise UnsafeArchiveError(
            f"archive member {name!r} contains a NUL byte; the archive is refused"
        )
    return "/".join(parts)


def _check_tar_member(member: tarfile.TarInfo) -> str:
    """Normalised name of a safe tar member (a regular file or a folder); undecodable bytes escaped."""
    name = safe_member_name(escape_undecodable(member.name))
    if member.issym() or member.islnk():
        raise UnsafeArchiveError(
            f"archive member {member.name!r} is a link (to {member.linkname!r}); links are refused"
        )
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(
            f"archive member {member.name!r} is a device, FIFO or other special file; refused"
        )
    return name


def _check_zip_member(info: zipfile.ZipInfo, key: str | None = None) -> str:
    """Normalised name of a safe zip member (a regular file or a folder).

    ``key`` is the member's name as ``zip_member_key`` gives it (default: ``info.filename``).
    """
    name = safe_member_name(info.filename if key is None else key)
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise UnsafeArchiveError(
            f"archive member {info.filename!r} is a symlink; links are refused"
        )
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise UnsafeArchiveError(
            f"archive member {info.filename!r} is a device, FIFO or other special file; refused"
        )
    if info.flag_bits & 0x1:
        raise InputError(
            f"archive member {info.filename!r} is encrypted; upload an unencrypted archive"
        )
    return name


def split_root(folder: Path) -> Path:
    """The folder itself, or its only entry when that is a folder (archives often wrap one)."""
    entries = [e for e in folder.iterdir() if not is_hidden(e.name)]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return folder


def _copy_limited(src: IO[bytes], dst_path: Path, budget: int, what: str) -> int:
    """Copy ``src`` to a new file, at most ``budget`` bytes; returns the bytes written."""
    written = 0
    with open(dst_path, "wb") as dst:
        while chunk := src.read(_COPY_CHUNK):
            written += len(chunk)
            if written > budget:
                raise InputError(f"{what} unpacks to more than the allowed size; archive refused")
            dst.write(chunk)
    return written


def extract_archive(
    path: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> Path:
    """Unpack a zip / tar / tar.gz into the empty folder ``dest``; returns the split's root.

    Every member is checked before it is written: absolute paths, ``..``, links and special
    files raise ``UnsafeArchiveError``; more than ``max_members`` members or ``max_bytes``
    unpacked bytes raise ``InputError``. On any error ``dest`` is emptied again. ``__MACOSX/``
    and other hidden members are skipped. The returned root is ``dest``, or its only folder
    when the archive wraps everything in one.
    """
    src = Path(path)
    if not src.is_file():
        raise InputError(f"{path} does not exist" if not src.exists() else f"{path} is not a file")
    kind = archive_kind(src)
    if kind is None:
        raise InputError(f"{path} is not a zip or tar archive")
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise InputError(f"extraction folder {dest} is not empty")
    out = out.resolve()
    try:
        if kind == "zip":
            _extract_zip(src, out, max_bytes, max_members)
        else:
            _extract_tar(src, out, max_bytes, max_members)
    except BaseException as exc:
        for child in out.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        if isinstance(
            exc, zipfile.BadZipFile | tarfile.TarError | EOFError | zlib.error | UnicodeError
        ):
            raise InputError(f"{path} is not a readable archive: {exc}") from exc
        if isinstance(exc, OSError) and not isinstance(exc, InputError):
            raise InputError(f"cannot unpack {path}: {exc}") from exc
        raise
    return split_root(out)


def _target(out: Path, name: str) -> Path:
    """Where a checked member goes (re-checked against ``out`` as a second line of defence)."""
    target = out.joinpath(*name.split("/"))
    if os.path.commonpath([out, target.resolve()]) != str(out):
        raise UnsafeArchiveError(f"archive member {name!r} escapes the extraction folder")
    return target


def _extract_zip(src: Path, out: Path, max_bytes: int, max_members: int) -> None:
    with open_zip(src) as zf:
        infos = zf.infolist()
        if len(infos) > max_members:
            raise InputError(f"{src} has {len(infos)} members; at most {max_members} are allowed")
        names = [
            _check_zip_member(info, zip_member_key(zf, info)) for info in infos
        ]  # refuse before writing
        declared = sum(info.file_size for info in infos)
        if declared > max_bytes:
            raise InputError(f"{src} unpacks to {declared} bytes; at most {max_bytes} are allowed")
        used = 0
        for info, name in zip(infos, names, strict=True):
            if not name or is_hidden(name):
                continue
            target = _target(out, name)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            used += _copy_zip_member(zf, info, target, max_bytes - used, str(src))


# The methods Python's zipfile decompresses; others (Deflate64, PPMd, ...) it cannot open.
_ZIP_METHODS = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)


def _copy_zip_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: int, where: str
) -> int:
    """Copy one member; a compression method zipfile cannot read is an input error."""
    if info.compress_type not in _ZIP_METHODS:
        names: dict[int, str] = getattr(zipfile, "compressor_names", {})  # untyped in typeshed
        method = names.get(info.compress_type, f"method {info.compress_type}")
        raise InputError(
            f"{where}: member {info.filename!r} uses a compression method splitaudit cannot read "
            f"({method}); re-pack the archive with deflate or store"
        )
    with zf.open(info) as fh:
        return _copy_limited(fh, target, budget, where)


def _extract_tar(src: Path, out: Path, max_bytes: int, max_members: int) -> None:
    used = count = declared = 0
    with tarfile.open(src, "r|*") as tf:  # streaming: one pass, any compression
        for member in iter_members(tf):
            count += 1
            if count > max_members:
                raise InputError(f"{src} has more than {max_members} members; archive refused")
            name = _check_tar_member(member)
            declared += member.size if member.isfile() else 0  # skipped members cost work too
            if declared > max_bytes:
                raise InputError(f"{src} unpacks to more than {max_bytes} bytes; archive refused")
            if not name or is_hidden(name):
                continue
            target = _target(out, name)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fh = tf.extractfile(member)
            if fh is not None:
                used += _copy_limited(fh, target, max_bytes - used, str(src))


class _Member(NamedTuple):
    """An image member of an archive read in place."""

    key: str
    locator: Locator
    caption_name: str | None


class ArchiveSource:
    """A zip or uncompressed tar read in place (locators ``zip`` / ``tar``), as one shard.

    Members are checked when the source is opened (unsafe ones raise ``UnsafeArchiveError``).
    Keys and labels follow the folder rules on the member paths (after dropping a single
    wrapping folder): ImageFolder labels, ``foo.txt`` captions, ``labels.csv`` at the root.
    A ``manifest.*`` inside an archive is honoured only by ``open_split``, which unpacks it.
    Compressed tars cannot be read in place: use ``open_split`` / ``extract_archive``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        p = Path(path).expanduser()
        if not p.is_file():
            raise InputError(
                f"{path} does not exist" if not p.exists() else f"{path} is not a file"
            )
        self.path = p.resolve()
        self.uri = str(self.path)
        self.kind = archive_kind(self.path)
        if self.kind is None:
            raise InputError(f"{path} is not a zip or tar archive")
        if self.kind == "tar" and is_compressed_tar(self.path):
            raise InputError(
                f"{path} is a compressed tar, which cannot be read in place; "
                "decompress it, or audit it as a split (it is unpacked to a temporary folder)"
            )
        try:
            self._files = self._scan()
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, UnicodeError) as exc:
            raise InputError(f"{path} is not a readable archive: {exc}") from exc
        paths = [name for name in self._files if not is_hidden(name)]
        tops = {name.split("/", 1)[0] for name in paths}
        wrapped = len(tops) == 1 and all("/" in name for name in paths)
        self._prefix = f"{tops.pop()}/" if wrapped else ""
        scan = LayoutScan()
        for name in paths:
            if is_image_name(name):
                scan.add(name[len(self._prefix) :])
        self.is_imagefolder = scan.is_imagefolder
        labels_loc = self._files.get(f"{self._prefix}labels.csv")
        self.labels = (
            parse_labels_bytes(labels_loc.read_bytes(), f"{self.uri}#labels.csv")
            if labels_loc
            else {}
        )

    def _scan(self) -> dict[str, Locator]:
        """Normalised name -> locator of every regular member (checked for safety)."""
        files: dict[str, Locator] = {}
        if self.kind == "zip":
            with open_zip(self.path) as zf:
                for info in zf.infolist():
                    name = _check_zip_member(info, zip_member_key(zf, info))
                    if not info.is_dir() and name:
                        files[name] = Locator(kind="zip", path=self.uri, member=info.filename)
            return files
        with tarfile.open(self.path, "r:") as tf:
            for member in iter_members(tf):
                name = _check_tar_member(member)
                if member.isfile() and name:
                    files[name] = Locator.tar_member(self.uri, member)
        return files

    def count_hint(self) -> int:
        """The image members (the progress total), from the member list read when opened."""
        return sum(1 for _ in self._members())

    def shards(self) -> Iterator[Shard]:
        """The single shard (named after the archive); fingerprint = size + mtime."""
        st = self.path.stat()
        yield Shard(self.uri, self.path.name, digest(st.st_size, st.st_mtime_ns))

    def records(self, shard: Shard) -> Iterator[Record]:
        """One record per image member, in archive order."""
        for member in self._members():
            caption = None
            if member.caption_name is not None:
                try:
                    caption = decode_caption(self._files[member.caption_name].read_bytes())
                except (OSError, zipfile.BadZipFile) as exc:
                    logger.warning(
                        "cannot read caption %s in %s: %s", member.caption_name, self.uri, exc
                    )
            label = lookup_label(self.labels, member.key) if self.labels else None
            if label is None and self.is_imagefolder:
                label = imagefolder_label(member.key)
            yield Record(
                member.key, self.uri, shard.name, member.locator, caption=caption, label=label
            )

    def _members(self) -> Iterator[_Member]:
        for name, locator in self._files.items():
            if is_hidden(name) or not is_image_name(name):
                continue
            sidecar = os.path.splitext(name)[0] + ".txt"
            yield _Member(
                name[len(self._prefix) :], locator, sidecar if sidecar in self._files else None
            )
