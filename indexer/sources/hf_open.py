"""Telling a Hugging Face dataset (hf://, save_to_disk folder, Parquet with image bytes) from other sources."""

from __future__ import annotations

import os
from pathlib import Path

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.extras import HF_MODULES, require_extra
from splitaudit.indexer.sources.hf_arrow import HFArrowSource, is_save_to_disk
from splitaudit.indexer.sources.hf_hub import is_hf_uri, resolve_hf_uri
from splitaudit.indexer.sources.hf_parquet import (
    HFParquetSource,
    find_parquet_dataset,
    is_glob,
    parquet_layout,
    split_column_marks,
)
from splitaudit.indexer.sources.record import Source

MANIFEST_COLUMNS = ("path", "url")


def open_hf(
    spec: str | os.PathLike[str],
    *,
    image_column: str | None = None,
    key_column: str | None = None,
) -> Source | None:
    """The Hugging Face dataset ``spec`` names, or ``None`` when it is another kind of source.

    ``spec`` may end in ``#image_column=NAME`` / ``#key_column=NAME`` (how such a source's
    ``uri`` records explicit columns), so a stored split re-opens the same way.
    """
    text, marked, marked_key = split_column_marks(os.fspath(spec))
    column = image_column or marked
    key = key_column or marked_key
    if is_hf_uri(text):
        local = resolve_hf_uri(text)
        source = _open_local(local, column, key)
        if source is None:
            local_path = Path(local)
            if local_path.suffix.lower() == ".parquet" and local_path.is_file():
                return HFParquetSource(local_path, image_column=column, key_column=key)
            raise InputError(
                f"{spec} ({local}) holds no Parquet files with images and no save_to_disk data"
            )
        return source
    return _open_local(text, column, key)


def _open_local(text: str, column: str | None, key: str | None = None) -> Source | None:
    path = Path(os.path.expanduser(text))
    if is_glob(text):
        return (
            HFParquetSource(text, image_column=column, key_column=key)
            if text.lower().endswith(".parquet")
            else None
        )
    if path.is_dir():
        if is_save_to_disk(path):
            return HFArrowSource(path, image_column=column, key_column=key)
        if find_parquet_dataset(path) is not None:
            return HFParquetSource(path, image_column=column, key_column=key)
    elif path.is_file() and path.suffix.lower() == ".arrow":
        return HFArrowSource(path, image_column=column, key_column=key)
    elif path.is_file() and path.suffix.lower() == ".parquet" and column is not None:
        return HFParquetSource(path, image_column=column, key_column=key)
    return None


def open_hf_parquet_file(
    path: Path, *, image_column: str | None = None, key_column: str | None = None
) -> Source | None:
    """A ``.parquet`` file as a Hugging Face dataset when it holds image bytes, ``None`` when it is
    a manifest (a ``path``/``url`` column, no ``datasets`` Image struct)."""
    if image_column is not None:
        return HFParquetSource(path, image_column=image_column, key_column=key_column)
    require_extra("hf", HF_MODULES, f"reading the Parquet file {path.name}")
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception:  # unreadable: ManifestSource says so with its own message
        return None
    manifest = any(c in names for c in MANIFEST_COLUMNS)
    try:
        layout = parquet_layout(path, image_column=None)
    except InputError as exc:
        if manifest:
            return None
        raise InputError(f"{exc}; nor is it a manifest (no 'path' or 'url' column)") from None
    if manifest and layout.image_kind != "struct":
        return None
    return HFParquetSource(path, image_column=None, key_column=key_column)
