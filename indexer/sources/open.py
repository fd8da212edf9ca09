"""Open a corpus source or a test split from a path: the first registered format that
recognises it (``sources/registry.py``; built-in formats in ``sources/builtin_formats.py``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.archive import DEFAULT_MAX_BYTES, DEFAULT_MAX_MEMBERS
from splitaudit.indexer.sources.builtin_formats import SINGLE_IMAGE_MANIFEST, SPLIT_MANIFESTS
from splitaudit.indexer.sources.labels_csv import LabelledSource, load_labels_csv
from splitaudit.indexer.sources.record import Source
from splitaudit.indexer.sources.registry import OpenOptions, Target, first_location, first_opened
from splitaudit.indexer.sources.roots import RootedSource, check_path_allowed, real_roots

__all__ = [
    "SINGLE_IMAGE_MANIFEST",
    "SPLIT_MANIFESTS",
    "load_labels_csv",
    "open_source",
    "open_split",
    "split_location",
]

_NOT_A_SPLIT = (
    "{path} is not a folder, a manifest (.csv/.tsv/.jsonl/.parquet), a zip/tar archive or an image"
)


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
    target = Target(spec)
    found = first_opened(
        target, OpenOptions(image_column=image_column, key_column=key_column), split=False
    )
    if found is not None:
        return found[1]
    raise _unrecognised(
        target,
        f"cannot tell what kind of source {spec} is: expected a folder, a manifest "
        "(.csv/.tsv/.jsonl/.parquet), WebDataset .tar shards, a zip/tar archive, "
        "or a clip-retrieval folder with img_emb/",
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
    options = OpenOptions(image_column, key_column, workdir, roots, max_bytes, max_members)
    target = Target(path)
    found = first_opened(target, options, split=True)
    if found is None:
        raise _unrecognised(target, _NOT_A_SPLIT.format(path=path))
    fmt, source = found
    if roots is not None and fmt.rooted:
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
    options = OpenOptions(image_column, key_column, workdir, None, max_bytes, max_members)
    target = Target(path)
    found = first_location(target, options)
    if found is None:
        raise _unrecognised(target, _NOT_A_SPLIT.format(path=path))
    return found


def _unrecognised(target: Target, message: str) -> InputError:
    """What to raise when no registered format reads ``target``: it is missing, or ``message``."""
    if not target.exists:
        return InputError(f"{target.spec} does not exist")
    return InputError(message)
