"""Hugging Face ``save_to_disk`` folders: ``dataset_info.json`` + Arrow IPC stream files, batch by batch."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.extras import HF_MODULES, require_extra
from splitaudit.indexer.sources.hf_cells import open_arrow
from splitaudit.indexer.sources.hf_features import (
    ROWS_PER_BATCH,
    HFLayout,
    analyze_schema,
    batch_records,
)
from splitaudit.indexer.sources.hf_files import HFFileShards
from splitaudit.indexer.sources.hf_parquet import column_marks
from splitaudit.indexer.sources.record import Record, Shard

MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


def is_save_to_disk(path: Path) -> bool:
    """A ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk`` folder."""
    if (path / "dataset_dict.json").is_file():
        return True
    return any((path / m).is_file() for m in MARKERS[:2]) and any(path.glob("*.arrow"))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{path}: not a readable JSON file ({exc}); is the save_to_disk folder complete?"
        ) from exc
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected a JSON object")
    return value


def _dataset_files(folder: Path) -> list[Path]:
    """The Arrow files of one saved ``Dataset``: as ``state.json`` lists them, else ``*.arrow``."""
    state = folder / "state.json"
    if state.is_file():
        listed = _read_json(state).get("_data_files")
        if isinstance(listed, list) and listed:
            files = [
                folder / str(entry.get("filename")) for entry in listed if isinstance(entry, dict)
            ]
            missing = [f.name for f in files if not f.is_file()]
            if missing:
                raise InputError(
                    f"{folder}: state.json lists {', '.join(missing)}, which are missing"
                )
            return files
    # cache-*.arrow are datasets' map() caches, not the saved data.
    return sorted(f for f in folder.glob("*.arrow") if not f.name.startswith("cache-"))


class HFArrowSource(HFFileShards):
    """Rows of a ``save_to_disk`` folder (a ``Dataset``, or a ``DatasetDict`` with one folder per
    split) or of one ``.arrow`` file; one shard per Arrow file (``test/data-00000-of-00001.arrow``).

    Features (image column, ``ClassLabel`` names) come from the Arrow schema metadata, else
    ``dataset_info.json``. Each record carries its bytes and an ``arrow`` locator (file, record
    batch, row, column) to read them again.
    """

    def __init__(
        self,
        spec: str | os.PathLike[str],
        *,
        image_column: str | None = None,
        key_column: str | None = None,
    ) -> None:
        require_extra("hf", HF_MODULES, "reading a Hugging Face dataset")
        path = Path(os.path.abspath(os.path.expanduser(os.fspath(spec))))
        if not path.exists():
            raise InputError(f"{spec} does not exist")
        folders: list[Path]
        if path.is_file():
            self.root, files = path.parent, [path]
            folders = []
        else:
            self.root = path
            if (path / "dataset_dict.json").is_file():
                splits = _read_json(path / "dataset_dict.json").get("splits")
                if not isinstance(splits, list) or not splits:
                    raise InputError(f"{path}/dataset_dict.json names no splits")
                folders = [path / str(s) for s in splits]
            else:
                folders = [path]
            files = [f for folder in folders for f in _dataset_files(folder)]
        if not files:
            raise InputError(
                f"{spec} holds no .arrow files: pass the folder Dataset.save_to_disk wrote"
            )
        self.files = files
        self.image_column, self.key_column = image_column, key_column
        self.uri = str(path) + column_marks(image_column, key_column)
        info = {f: (f.parent / "dataset_info.json") for f in files}
        self._layouts = {str(f): self._layout(f, info[f], image_column, key_column) for f in files}

    @staticmethod
    def _layout(
        path: Path, info: Path, image_column: str | None, key_column: str | None = None
    ) -> HFLayout:
        features = None
        if info.is_file():
            raw = _read_json(info).get("features")
            features = raw if isinstance(raw, dict) else None
        try:
            with open_arrow(str(path)) as reader:
                schema = reader.schema
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants
            raise InputError(f"{path}: not a readable Arrow file ({exc})") from exc
        from splitaudit.indexer.sources.hf_features import hf_features

        return analyze_schema(
            schema,
            where=str(path),
            image_column=image_column,
            features=hf_features(schema) or features,
            key_column=key_column,
        )

    def count_hint(self) -> int:
        """The rows of every Arrow file (the progress total): memory-mapped, so only the record
        batch headers are read, never the image bytes."""
        total = 0
        for f in self.files:
            try:
                with open_arrow(str(f)) as reader:
                    total += sum(batch.num_rows for batch in reader)
            except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants
                raise InputError(f"{f}: not a readable Arrow file ({exc})") from exc
        return total

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one Arrow file, one record batch at a time (memory-mapped)."""
        path, layout = self._shard_file(shard)
        file_row = 0
        try:
            with open_arrow(str(path)) as reader:
                for unit, batch in enumerate(reader):
                    for start in range(0, batch.num_rows, ROWS_PER_BATCH):
                        part = batch.slice(start, ROWS_PER_BATCH)
                        yield from batch_records(
                            part,
                            layout,
                            source=self.uri,
                            shard=shard,
                            kind="arrow",
                            path=str(path),
                            unit=unit,
                            first_row=start,
                            file_row=file_row + start,
                        )
                    file_row += batch.num_rows
        except InputError:
            raise
        except Exception as exc:
            import pyarrow as pa

            if isinstance(exc, pa.ArrowException | OSError):
                raise InputError(
                    f"{path}: cannot read the Arrow file after row {file_row} ({exc})"
                ) from exc
            raise
