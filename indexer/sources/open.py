"""Open a corpus source or a test split from a path, choosing the reader by what the path is."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from splitaudit.indexer.errors import InputError, UsageError
from splitaudit.indexer.sources._layout import is_hidden, is_image_name
from splitaudit.indexer.sources.archive import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_MEMBERS,
    ArchiveSource,
    archive_kind,
    extract_archive,
)
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.hf_open import open_hf, open_hf_parquet_file
from splitaudit.indexer.sources.labels_csv import LabelledSource, load_labels_csv
from splitaudit.indexer.sources.manifest import FORMATS, ManifestSource
from splitaudit.indexer.sources.record import Source
from splitaudit.indexer.sources.roots import RootedSource, check_path_allowed, real_roots
from splitaudit.indexer.sources.webdataset import (
    COMPRESSED_SUFFIXES,
    WebDatasetSource,
    looks_like_webdataset,
)

__all__ = ["load_labels_csv", "open_source", "open_split"]

SPLIT_MANIFESTS = ("manifest.jsonl", "manifest.csv", "manifest.parquet")
_NOT_A_SPLIT = (
    "{path} is not a folder, a manifest (.csv/.tsv/.jsonl/.parquet), a zip/tar archive or an image"
)
SINGLE_IMAGE_MANIFEST = "single-image.jsonl"
_ARCHIVE_NEEDS_WORKDIR = "{path} is an archive: pass workdir= (an empty folder) to unpack it into"


def _is_shard_dir(path: Path) -> bool:
    """A folder of tar files (as img2dataset writes it): tars, no images, no subfolders."""
    with os.scandir(path) as it:
        entries = [e for e in it if not is_hidden(e.name)]
    if any(e.is_dir() for e in entries):
        return False
    names = [e.name for e in entries if e.is_file()]
    tars = [n for n in names if n.endswith(".tar") or n.lower().endswith(COMPRESSED_SUFFIXES)]
    return bool(tars) and not any(is_image_name(n) for n in names)


def open_source(
    spec: str | os.PathLike[str],
    *,
    image_column: str | None = None,
    key_column: str | None = None,
) -> Source:
    """A corpus source for ``spec``.

    ``hf://datasets/...``, a ``save_to_disk`` folder, a folder or glob of Parquet files with
    image bytes (no images beside them), or such a ``.parquet`` file -> a Hugging Face dataset
    (``image_column`` names its image column when the type does not tell); a folder with
    ``img_emb/`` -> precomputed embeddings; a folder of ``.tar`` files (no
    images, no subfolders: img2dataset's output) -> WebDataset; another folder -> the images
    in it; ``.csv``/``.tsv``/``.jsonl``/``.parquet`` -> manifest; a ``.tar`` whose members
    pair ``{key}.jpg`` with ``{key}.json`` (or flat ``{key}.txt``) -> one WebDataset shard;
    another ``.zip``/``.tar`` -> archive read in place.
    """
    hf = (
        None
        if os.path.isdir(spec)
        else open_hf(spec, image_column=image_column, key_column=key_column)
    )
    if hf is not None:
        return hf
    path = Path(spec).expanduser()
    if not path.exists():
        raise InputError(f"{spec} does not exist")
    if path.is_dir():
        if (path / "img_emb").is_dir():
            return PrecomputedEmbeddingSource(path)
        if _is_shard_dir(path):
            return WebDatasetSource(path)
        return open_hf(path, image_column=image_column, key_column=key_column) or FolderSource(path)
    if path.suffix.lower() == ".parquet":
        return open_hf_parquet_file(
            path, image_column=image_column, key_column=key_column
        ) or ManifestSource(path)
    if path.suffix.lower() in FORMATS:
        return ManifestSource(path)
    kind = archive_kind(path)
    if kind == "tar" and looks_like_webdataset(path):
        return WebDatasetSource(path)
    if kind is not None:
        return ArchiveSource(path)
    raise InputError(
        f"cannot tell what kind of source {spec} is: expected a folder, a manifest "
        "(.csv/.tsv/.jsonl/.parquet), WebDataset .tar shards, a zip/tar archive, "
        "or a clip-retrieval folder with img_emb/"
    )


def open_split(
    path: str | os.PathLike[str],
    *,
    workdir: str | os.PathLike[str] | None = None,
    labels: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
    image_column: str | None = None,
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    key_column: str | None = None,
) -> Source:
    """A test split: a folder (ImageFolder or not), a manifest file, a zip/tar archive, or a
    Hugging Face dataset (as ``open_source`` tells them apart).

    Archives are unpacked with ``extract_archive`` into ``workdir``, an empty folder the
    caller owns and deletes (required for archives). In a split folder, ``manifest.jsonl`` /
    ``manifest.csv`` / ``manifest.parquet`` at the root switch to manifest mode (paths relative
    to the root); otherwise images are read as a folder and a root ``labels.csv`` (``key,label``)
    sets labels. ``labels`` (e.g. ``--labels FILE``) overrides every other label.

    With ``allowed_roots`` (a job submitted over the API), ``path`` itself must lie under
    them (``PathNotAllowedError``) and every record naming a URL or a file outside them
    (symlinks resolved, checked as the records are read) is a failed item "path not allowed".
    """
    p = Path(path).expanduser()
    roots = None if allowed_roots is None else real_roots(allowed_roots)
    if roots is not None:
        check_path_allowed(p, roots, what="split")
    hf = (
        None
        if os.path.isdir(path)
        else open_hf(path, image_column=image_column, key_column=key_column)
    )
    if hf is not None:
        return LabelledSource(hf, labels) if labels else hf
    if not p.exists():
        raise InputError(f"{path} does not exist")
    source: Source
    if p.is_dir():
        source = _open_split_folder(p, roots, image_column=image_column, key_column=key_column)
    elif p.suffix.lower() == ".parquet":
        source = open_hf_parquet_file(
            p, image_column=image_column, key_column=key_column
        ) or ManifestSource(p, allowed_roots=roots)
    elif p.suffix.lower() in FORMATS:
        source = ManifestSource(p, allowed_roots=roots)
    elif is_image_name(p.name) and archive_kind(p) is None:
        source = ManifestSource(_single_image_manifest(p, workdir), allowed_roots=roots)
    elif archive_kind(p) is not None:
        if workdir is None:
            raise UsageError(_ARCHIVE_NEEDS_WORKDIR.format(path=path))
        root = extract_archive(p, workdir, max_bytes=max_bytes, max_members=max_members)
        source = _open_split_folder(
            root,
            None if roots is None else [*roots, os.path.realpath(workdir)],
            image_column=image_column,
            key_column=key_column,
        )
    else:
        raise InputError(_NOT_A_SPLIT.format(path=path))
    if roots is not None:
        source = RootedSource(source, roots)
    return LabelledSource(source, labels) if labels else source


def split_location(
    path: str | os.PathLike[str],
    *,
    workdir: str | os.PathLike[str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
    image_column: str | None = None,
    key_column: str | None = None,
) -> str:
    """Where a split's items are read from, as a URI: its folder or manifest, the folder an
    archive unpacks into, or a Hugging Face dataset's ``uri`` (which records ``image_column``).

    ``open_split`` of the result reads the same split without a ``workdir`` or
    ``image_column``; archives are unpacked into ``workdir`` as in ``open_split``.
    """
    hf = (
        None
        if os.path.isdir(path)
        else open_hf(path, image_column=image_column, key_column=key_column)
    )
    if hf is not None:
        return hf.uri
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{path} does not exist")
    if p.is_file() and is_image_name(p.name) and archive_kind(p) is None:
        return str(_single_image_manifest(p, workdir))
    if not (p.is_dir() or p.suffix.lower() in FORMATS):
        if archive_kind(p) is None:
            raise InputError(_NOT_A_SPLIT.format(path=path))
        if workdir is None:
            raise UsageError(_ARCHIVE_NEEDS_WORKDIR.format(path=path))
        p = extract_archive(p, workdir, max_bytes=max_bytes, max_members=max_members)
    p = p.resolve()
    if (image_column or key_column) and not any((p / name).is_file() for name in SPLIT_MANIFESTS):
        # A dataset read with an explicit image column: its uri carries the column.
        found = open_hf(p, image_column=image_column, key_column=key_column)
        if found is not None:
            return found.uri
    return str(p)


def _single_image_manifest(image: Path, workdir: str | os.PathLike[str] | None) -> Path:
    """A one-row manifest in ``workdir`` naming ``image`` (key: its file name): a one-image split."""
    if workdir is None:
        raise UsageError(f"{image} is a single image: pass workdir= (a folder) for its manifest")
    manifest = Path(workdir) / SINGLE_IMAGE_MANIFEST
    row = {"path": str(image.resolve()), "key": image.name}
    manifest.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return manifest


def _open_split_folder(
    root: Path,
    roots: list[str] | None = None,
    *,
    image_column: str | None = None,
    key_column: str | None = None,
) -> Source:
    """Manifest mode when the folder has a root manifest, a Hugging Face dataset when it holds
    one (Parquet with image bytes, or save_to_disk), else images with optional labels.csv."""
    for name in SPLIT_MANIFESTS:
        if (root / name).is_file():
            if roots is not None:
                check_path_allowed(root / name, roots, what="split manifest")
            return ManifestSource(root / name, allowed_roots=roots)
    hf = open_hf(root, image_column=image_column, key_column=key_column)
    if hf is not None:
        return hf
    folder = FolderSource(root)
    if (root / "labels.csv").is_file():
        if roots is not None:
            check_path_allowed(root / "labels.csv", roots, what="labels file")
        return LabelledSource(folder, load_labels_csv(root / "labels.csv"))
    return folder
