"""Hugging Face datasets laid out on disk with pyarrow, as ``datasets`` and the hub write them.

No ``datasets`` library and no network: Parquet files with an ``Image`` struct column and
``ClassLabel`` names in the ``huggingface`` schema metadata, ``save_to_disk`` folders (Arrow
IPC stream files + ``dataset_info.json`` + ``state.json``), and a hub cache folder
(``datasets--OWNER--NAME/{blobs,refs,snapshots}``) that ``huggingface_hub`` reads offline.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from PIL import Image


def jpeg(image: Image.Image, quality: int = 90) -> bytes:
    """``image`` encoded as JPEG."""
    out = io.BytesIO()
    image.convert("RGB").save(out, format="JPEG", quality=quality)
    return out.getvalue()


@dataclass
class HFRows:
    """Rows of an image classification dataset with captions."""

    images: list[bytes]
    labels: list[int]
    captions: list[str]
    names: Sequence[str]
    image_paths: list[str | None] = field(default_factory=list)

    def features(self) -> dict[str, Any]:
        """The ``datasets`` feature dict (as in ``dataset_info.json``)."""
        return {
            "image": {"_type": "Image"},
            "label": {"names": list(self.names), "_type": "ClassLabel"},
            "caption": {"dtype": "string", "_type": "Value"},
        }

    def table(self, *, with_metadata: bool = True) -> pa.Table:
        """The rows as an Arrow table (``huggingface`` schema metadata unless told otherwise)."""
        paths = self.image_paths or [f"img{i:04d}.jpg" for i in range(len(self.images))]
        image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        schema = pa.schema([("image", image_type), ("label", pa.int64()), ("caption", pa.string())])
        if with_metadata:
            meta = json.dumps({"info": {"features": self.features()}})
            schema = schema.with_metadata({b"huggingface": meta.encode()})
        images = [{"bytes": b, "path": p} for b, p in zip(self.images, paths, strict=True)]
        return pa.Table.from_pydict(
            {"image": images, "label": self.labels, "caption": self.captions}, schema=schema
        )


def write_parquet(path: Path, rows: HFRows, *, row_group_size: int = 4) -> Path:
    """One Parquet file as ``datasets.Dataset.to_parquet`` / the hub's converter write it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows.table(), path, row_group_size=row_group_size)
    return path


def write_save_to_disk(
    folder: Path, rows: HFRows, *, batch_rows: int = 3, schema_metadata: bool = False
) -> Path:
    """A ``Dataset.save_to_disk`` folder: one Arrow stream file, ``dataset_info.json``, ``state.json``.

    ``datasets`` keeps the features in ``dataset_info.json``; ``schema_metadata`` also puts them
    in the Arrow schema.
    """
    folder.mkdir(parents=True, exist_ok=True)
    table = rows.table(with_metadata=schema_metadata)
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(folder / name), "wb") as sink, ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    (folder / "dataset_info.json").write_text(
        json.dumps({"features": rows.features(), "citation": ""})
    )
    (folder / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": name}], "_fingerprint": "0", "_split": None})
    )
    return folder


def write_hub_cache(
    cache: Path,
    repo_id: str,
    files: Mapping[str, Path],
    *,
    revision: str = "main",
    commit: str | None = None,
) -> Path:
    """Lay ``files`` (path in repo -> local file) out in a hub cache; returns the snapshot folder.

    Like ``huggingface_hub``: content-addressed ``blobs/``, ``snapshots/<commit>/`` of relative
    symlinks to them, and ``refs/<revision>`` holding the commit hash.
    """
    commit = commit or hashlib.sha1(repo_id.encode() + revision.encode()).hexdigest()
    repo = cache / f"datasets--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for rel, src in files.items():
        data = src.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        target = snapshot / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(os.path.relpath(blob, target.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    return snapshot
