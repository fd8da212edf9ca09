"""The built-in source formats, registered in the order ``open_source`` / ``open_split`` try them.

Corpus: a Hugging Face dataset named by URI, glob or file; a folder with ``img_emb/``
(precomputed embeddings); a folder of ``.tar`` shards or a ``.tar`` pairing ``{key}.jpg`` with
``{key}.json`` (WebDataset); a manifest file; a ``save_to_disk`` / Parquet dataset folder;
another folder; a zip/tar archive read in place. Split: the same without the corpus-only
formats, plus a folder with a root ``manifest.*``, a single image, and archives unpacked into
``workdir``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.sources._layout import is_hidden, is_image_name
from splitaudit.indexer.sources.archive import (
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
from splitaudit.indexer.sources.registry import (
    OpenOptions,
    SourceFormat,
    Target,
    first_opened,
    register_source_format,
)
from splitaudit.indexer.sources.roots import check_path_allowed
from splitaudit.indexer.sources.webdataset import (
    COMPRESSED_SUFFIXES,
    WebDatasetSource,
    looks_like_webdataset,
)

SPLIT_MANIFESTS = ("manifest.jsonl", "manifest.csv", "manifest.parquet")
SINGLE_IMAGE_MANIFEST = "single-image.jsonl"
ARCHIVE_NEEDS_WORKDIR = "{path} is an archive: pass workdir= (an empty folder) to unpack it into"


def _is_file_like(t: Target) -> bool:
    return t.exists and not t.is_dir


def _hf(t: Target, o: OpenOptions) -> Source | None:
    return open_hf(t.spec, image_column=o.image_column, key_column=o.key_column)


def _hf_folder(t: Target, o: OpenOptions) -> Source | None:
    return open_hf(t.path, image_column=o.image_column, key_column=o.key_column)


def _hf_uri(t: Target, o: OpenOptions) -> str | None:
    found = _hf(t, o)
    return None if found is None else found.uri


def _is_shard_dir(path: Path) -> bool:
    """A folder of tar files (as img2dataset writes it): tars, no images, no subfolders."""
    with os.scandir(path) as it:
        entries = [e for e in it if not is_hidden(e.name)]
    if any(e.is_dir() for e in entries):
        return False
    names = [e.name for e in entries if e.is_file()]
    tars = [n for n in names if n.endswith(".tar") or n.lower().endswith(COMPRESSED_SUFFIXES)]
    return bool(tars) and not any(is_image_name(n) for n in names)


def _root_manifest(t: Target) -> Path | None:
    if not t.is_dir:
        return None
    return next((t.path / n for n in SPLIT_MANIFESTS if (t.path / n).is_file()), None)


def _manifest_corpus(t: Target, o: OpenOptions) -> Source | None:
    if t.is_dir:
        return None  # a folder holding a manifest is a folder as a corpus
    if t.suffix == ".parquet":
        found = open_hf_parquet_file(t.path, image_column=o.image_column, key_column=o.key_column)
        return found or ManifestSource(t.path)
    return ManifestSource(t.path)


def _manifest_split(t: Target, o: OpenOptions) -> Source | None:
    manifest = _root_manifest(t)
    if manifest is not None:
        if o.allowed_roots is not None:
            check_path_allowed(manifest, o.allowed_roots, what="split manifest")
        return ManifestSource(manifest, allowed_roots=o.allowed_roots)
    if t.suffix == ".parquet":
        found = open_hf_parquet_file(t.path, image_column=o.image_column, key_column=o.key_column)
        return found or ManifestSource(t.path, allowed_roots=o.allowed_roots)
    return ManifestSource(t.path, allowed_roots=o.allowed_roots)


def path_location(t: Target, o: OpenOptions) -> str:
    """A split read from its own path: the resolved path, or a dataset's ``uri`` when an
    explicit image/key column is given and no root manifest says otherwise."""
    p = t.path.resolve()
    if (o.image_column or o.key_column) and not any((p / n).is_file() for n in SPLIT_MANIFESTS):
        found = open_hf(p, image_column=o.image_column, key_column=o.key_column)
        if found is not None:
            return found.uri
    return str(p)


def _folder_split(t: Target, o: OpenOptions) -> Source:
    folder = FolderSource(t.path)
    labels = t.path / "labels.csv"
    if labels.is_file():
        if o.allowed_roots is not None:
            check_path_allowed(labels, o.allowed_roots, what="labels file")
        return LabelledSource(folder, load_labels_csv(labels))
    return folder


def count_folder(source: Source) -> int:
    """Images under a folder source: a walk of names (symlinked folders not followed, hidden skipped)."""
    assert isinstance(source, FolderSource)
    total = 0
    for _dir, dirs, files in os.walk(source.root):
        dirs[:] = [d for d in dirs if not is_hidden(d)]
        total += sum(1 for f in files if is_image_name(f) and not is_hidden(f))
    return total


def single_image_manifest(image: Path, workdir: str | os.PathLike[str] | None) -> Path:
    """A one-row manifest in ``workdir`` naming ``image`` (key: its file name): a one-image split."""
    if workdir is None:
        raise UsageError(f"{image} is a single image: pass workdir= (a folder) for its manifest")
    manifest = Path(workdir) / SINGLE_IMAGE_MANIFEST
    row = {"path": str(image.resolve()), "key": image.name}
    manifest.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return manifest


def _is_single_image(t: Target) -> bool:
    return _is_file_like(t) and is_image_name(t.path.name) and archive_kind(t.path) is None


def _single_image_split(t: Target, o: OpenOptions) -> Source:
    return ManifestSource(single_image_manifest(t.path, o.workdir), allowed_roots=o.allowed_roots)


def _extract(t: Target, o: OpenOptions) -> Path:
    if o.workdir is None:
        raise UsageError(ARCHIVE_NEEDS_WORKDIR.format(path=t.spec))
    return extract_archive(t.path, o.workdir, max_bytes=o.max_bytes, max_members=o.max_members)


def _archive_split(t: Target, o: OpenOptions) -> Source | None:
    """The archive unpacked into ``workdir``, opened as a split folder."""
    root = _extract(t, o)
    assert o.workdir is not None
    roots = None if o.allowed_roots is None else [*o.allowed_roots, os.path.realpath(o.workdir)]
    inner = OpenOptions(image_column=o.image_column, key_column=o.key_column, allowed_roots=roots)
    found = first_opened(Target(root), inner, split=True)
    return None if found is None else found[1]


def _archive_location(t: Target, o: OpenOptions) -> str:
    return path_location(Target(_extract(t, o)), o)


def _is_archive(t: Target) -> bool:
    return _is_file_like(t) and archive_kind(t.path) is not None


for _fmt in (
    # Named by URI, glob or file (never a folder); its records name no user files.
    SourceFormat(
        "huggingface",
        sniff=lambda t: not os.path.isdir(t.spec),
        open_corpus=_hf,
        open_split=_hf,
        split_location=_hf_uri,
        rooted=False,
    ),
    SourceFormat(
        "clip-retrieval",
        sniff=lambda t: t.is_dir and (t.path / "img_emb").is_dir(),
        open_corpus=lambda t, o: PrecomputedEmbeddingSource(t.path),
    ),
    SourceFormat(
        "webdataset",
        sniff=lambda t: (
            _is_shard_dir(t.path)
            if t.is_dir
            else _is_file_like(t)
            and archive_kind(t.path) == "tar"
            and looks_like_webdataset(t.path)
        ),
        open_corpus=lambda t, o: WebDatasetSource(t.path),
    ),
    SourceFormat(
        "manifest",
        sniff=lambda t: (_is_file_like(t) and t.suffix in FORMATS) or _root_manifest(t) is not None,
        open_corpus=_manifest_corpus,
        open_split=_manifest_split,
        split_location=path_location,
    ),
    SourceFormat(
        "huggingface-folder",
        sniff=lambda t: t.is_dir,
        open_corpus=_hf_folder,
        open_split=_hf_folder,
        split_location=path_location,
    ),
    SourceFormat(
        "folder",
        sniff=lambda t: t.is_dir,
        open_corpus=lambda t, o: FolderSource(t.path),
        open_split=_folder_split,
        split_location=path_location,
        source_type=FolderSource,
        count_images=count_folder,
    ),
    SourceFormat(
        "image",
        sniff=_is_single_image,
        open_split=_single_image_split,
        split_location=lambda t, o: str(single_image_manifest(t.path, o.workdir)),
    ),
    SourceFormat(
        "archive",
        sniff=_is_archive,
        open_corpus=lambda t, o: ArchiveSource(t.path),
        open_split=_archive_split,
        split_location=_archive_location,
    ),
):
    register_source_format(_fmt)
