"""Hugging Face datasets as Parquet files (image bytes in the file), streamed row group by row group."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.extras import HF_MODULES, require_extra
from splitaudit.indexer.sources._layout import is_hidden, is_image_name
from splitaudit.indexer.sources.hf_features import ROWS_PER_BATCH, HFLayout, analyze_schema
from splitaudit.indexer.sources.hf_files import HFFileShards
from splitaudit.indexer.sources.record import Record, Shard

GLOB_CHARS = frozenset("*?[")
IMAGE_COLUMN_MARK = "#image_column="
KEY_COLUMN_MARK = "#key_column="


def split_image_column(spec: str) -> tuple[str, str | None]:
    """``PATH#image_column=NAME`` (a source's ``uri`` with an explicit image column) split in two."""
    path, image_column, _key = split_column_marks(spec)
    return path, image_column


def split_column_marks(spec: str) -> tuple[str, str | None, str | None]:
    """``PATH[#image_column=NAME][#key_column=NAME]`` (a source's ``uri``) as (path, image, key)."""
    if os.path.exists(spec):
        return spec, None, None
    key = None
    if KEY_COLUMN_MARK in spec:
        spec, _, key_text = spec.rpartition(KEY_COLUMN_MARK)
        key = key_text or None
    if IMAGE_COLUMN_MARK in spec:
        path, _, column = spec.rpartition(IMAGE_COLUMN_MARK)
        return path, column or None, key
    return spec, None, key


def column_marks(image_column: str | None, key_column: str | None) -> str:
    """The ``uri`` suffix recording explicit image / key columns (empty when neither is given)."""
    return (f"{IMAGE_COLUMN_MARK}{image_column}" if image_column else "") + (
        f"{KEY_COLUMN_MARK}{key_column}" if key_column else ""
    )


def is_glob(spec: str) -> bool:
    """Whether ``spec`` is a glob pattern rather than a path that exists."""
    return any(c in spec for c in GLOB_CHARS) and not os.path.exists(spec)


def find_parquet_dataset(root: Path) -> list[Path] | None:
    """The Parquet files of a folder in the ``datasets`` layout (``data/*.parquet``, or
    config/split folders of a repo snapshot), or ``None`` when the folder holds images
    (then it is an image folder; the walk stops at the first image)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not is_hidden(d))
        for name in filenames:
            if is_image_name(name):
                return None
            if (
                name.lower().endswith(".parquet")
                and not is_hidden(name)
                and name != "manifest.parquet"
            ):
                found.append(Path(dirpath) / name)
    return sorted(found) or None


def _parquet_file(path: Path) -> Any:
    import pyarrow.parquet as pq  # lazy: pyarrow is heavy to import

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc


def parquet_layout(
    path: Path, *, image_column: str | None, key_column: str | None = None
) -> HFLayout:
    """The image/label/caption layout of one Parquet file (``InputError`` when it has no image)."""
    with _parquet_file(path) as pf:
        return analyze_schema(
            pf.schema_arrow, where=str(path), image_column=image_column, key_column=key_column
        )


class HFParquetSource(HFFileShards):
    """Rows of Hugging Face Parquet files; one shard per file, named by its path under the root.

    ``spec`` is a Parquet file, a folder (every ``*.parquet`` below it: ``data/test-*.parquet``
    or a repo snapshot's ``config/split/*.parquet``) or a glob (``data/test-*.parquet``). The
    image column is found by type (``datasets`` ``Image`` struct ``{bytes, path}``, or binary)
    unless ``image_column`` names it; ``ClassLabel`` ids become names; ``caption``/``text``
    becomes the caption and other columns metadata. Each record carries its bytes and a
    ``parquet`` locator (file, row group, row, column) to read them again.
    """

    def __init__(
        self,
        spec: str | os.PathLike[str],
        *,
        image_column: str | None = None,
        key_column: str | None = None,
    ) -> None:
        require_extra("hf", HF_MODULES, "reading a Hugging Face dataset")
        text = os.path.expanduser(os.fspath(spec))
        if is_glob(text):
            # abspath, not resolve: hub snapshot files are symlinks to blobs without a suffix.
            files = sorted(
                Path(os.path.abspath(p))
                for p in glob.glob(text, recursive=True)
                if p.lower().endswith(".parquet") and os.path.isfile(p)
            )
            if not files:
                raise InputError(f"no Parquet files match {spec}")
            root = Path(os.path.commonpath([str(f.parent) for f in files]))
            location = os.path.abspath(text)
        else:
            path = Path(os.path.abspath(text))
            if not path.exists():
                raise InputError(f"{spec} does not exist")
            if path.is_dir():
                found = find_parquet_dataset(path)
                if not found:
                    raise InputError(f"{spec} holds no Parquet files (and is not an image folder)")
                files, root = found, path
            else:
                files, root = [path], path.parent
            location = str(path)
        self.files = files
        self.root = root
        self.image_column, self.key_column = image_column, key_column
        self.uri = location + column_marks(image_column, key_column)
        self._layouts = {
            str(f): parquet_layout(f, image_column=image_column, key_column=key_column)
            for f in files
        }

    def count_hint(self) -> int:
        """The rows of every file, from the Parquet footers (no data read): the progress total."""
        total = 0
        for f in self.files:
            with _parquet_file(f) as pf:
                total += int(pf.metadata.num_rows)
        return total

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one file, one row group in memory at a time."""
        path, layout = self._shard_file(shard)
        from splitaudit.indexer.sources.hf_features import batch_records

        file_row = 0
        with _parquet_file(path) as pf:
            for group in range(pf.metadata.num_row_groups):
                try:
                    table = pf.read_row_group(group)
                except Exception as exc:  # a damaged row group: say where, do not guess rows
                    raise InputError(f"{path}: cannot read row group {group} ({exc})") from exc
                first = 0
                for batch in table.to_batches(max_chunksize=ROWS_PER_BATCH):
                    yield from batch_records(
                        batch,
                        layout,
                        source=self.uri,
                        shard=shard,
                        kind="parquet",
                        path=str(path),
                        unit=group,
                        first_row=first,
                        file_row=file_row + first,
                    )
                    first += batch.num_rows
                file_row += table.num_rows
                del table
