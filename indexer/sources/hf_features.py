"""Hugging Face ``datasets`` tables: which column holds the image, label names, and rows as records.

Shared by the Parquet (``hf_parquet``) and ``save_to_disk`` (``hf_arrow``) readers. The
``datasets`` library writes its feature types into the Arrow schema metadata under the
``huggingface`` key (and into ``dataset_info.json``): ``Image`` columns are structs
``{bytes, path}``, ``ClassLabel`` columns are integers whose names live there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources._layout import json_safe, text_value
from splitaudit.indexer.sources.record import Locator, LocatorKind, Record, Shard

HF_METADATA_KEY = b"huggingface"
# Text columns that become the record's caption (the first present wins); others stay metadata.
CAPTION_COLUMNS = ("caption", "text", "sentence", "alt_text", "description", "title")
# The row's key: an explicit key column, else the dataset's own id column (text or integer).
KEY_COLUMNS = ("key", "__key__", "id", "image_id", "img_id", "uid")
LABEL_COLUMN = "label"
# Metadata columns that restate the label (other ClassLabel columns, its name as text) are listed
# in a record's metadata under this key: the label tier never counts them as a self-leak.
LABEL_DERIVED_KEY = "label_derived"
LABEL_DERIVED_NAMES = frozenset(
    {
        "label_name",
        "label_text",
        "label_str",
        "class",
        "class_name",
        "classname",
        "category",
        "category_name",
        "text_label",
        "labels",
    }
)
ROWS_PER_BATCH = 256  # rows turned into Python objects at a time (the row group stays in Arrow)

ImageKind = Literal["struct", "binary"]


def hf_features(schema: Any) -> dict[str, Any]:
    """The ``datasets`` feature dict stored in an Arrow schema's metadata (empty when absent)."""
    raw = (schema.metadata or {}).get(HF_METADATA_KEY)
    if not raw:
        return {}
    try:
        info = json.loads(raw)
    except ValueError:
        return {}
    features = info.get("info", {}).get("features") if isinstance(info, dict) else None
    return features if isinstance(features, dict) else {}


def _image_kind(arrow_type: Any) -> ImageKind | None:
    """``struct`` for a ``{bytes: binary, ...}`` struct, ``binary`` for raw bytes, else ``None``."""
    import pyarrow as pa

    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "binary"
    if pa.types.is_struct(arrow_type):
        idx = arrow_type.get_field_index("bytes")
        if idx >= 0:
            inner = arrow_type.field(idx).type
            if pa.types.is_binary(inner) or pa.types.is_large_binary(inner):
                return "struct"
    return None


@dataclass(frozen=True, slots=True)
class HFLayout:
    """How the columns of one table map to a record."""

    image: str
    image_kind: ImageKind
    label: str | None = None
    caption: str | None = None
    key: str | None = None
    # ClassLabel column -> its names, in id order.
    class_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    metadata: tuple[str, ...] = ()
    # metadata columns that restate the label (see LABEL_DERIVED_KEY)
    label_derived: tuple[str, ...] = ()

    def label_name(self, column: str, value: Any) -> str | None:
        """A ClassLabel id as its name (``-1`` = no label); other values as text."""
        names = self.class_names.get(column)
        if names is not None and isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                return None
            return names[value] if value < len(names) else str(value)
        return text_value(value)


def analyze_schema(
    schema: Any,
    *,
    where: str,
    image_column: str | None = None,
    features: Mapping[str, Any] | None = None,
    key_column: str | None = None,
) -> HFLayout:
    """The layout of a table, or ``InputError`` saying which image (or key) column to name."""
    import pyarrow as pa

    feats = dict(features) if features else hf_features(schema)
    names = list(schema.names)
    kinds = {n: _image_kind(schema.field(n).type) for n in names}
    if image_column is not None:
        if image_column not in names:
            raise InputError(
                f"{where}: no column {image_column!r} for --image-column; columns: {', '.join(names)}"
            )
        kind = kinds[image_column]
        if kind is None:
            raise InputError(
                f"{where}: column {image_column!r} is {schema.field(image_column).type}, not image "
                "bytes; --image-column must name a struct {bytes, path} (datasets Image) or a binary column"
            )
        image = image_column
    else:
        candidates = [n for n in names if kinds[n] is not None]
        typed = [n for n in candidates if _feature_type(feats.get(n)) == "Image"]
        chosen = typed or candidates
        if not chosen:
            raise InputError(
                f"{where}: no image column (a struct {{bytes, path}} as datasets' Image feature "
                f"writes it, or a binary column); columns: {', '.join(names) or '(none)'}. "
                "Name the column holding the image bytes with --image-column"
            )
        if len(chosen) > 1:
            raise InputError(
                f"{where}: several columns could hold the image ({', '.join(chosen)}); "
                "choose one with --image-column"
            )
        image, kind = chosen[0], kinds[chosen[0]]
    assert kind is not None
    class_names: dict[str, tuple[str, ...]] = {}
    for n in names:
        feat = feats.get(n)
        if (
            isinstance(feat, dict)
            and _feature_type(feat) == "ClassLabel"
            and pa.types.is_integer(schema.field(n).type)
        ):
            class_names[n] = tuple(str(x) for x in feat.get("names") or ())
    if LABEL_COLUMN in names and kinds[LABEL_COLUMN] is None:
        label: str | None = LABEL_COLUMN
    else:
        label = next(iter(class_names), None)
    caption = next(
        (c for c in CAPTION_COLUMNS if c in names and _is_text(schema.field(c).type)), None
    )
    if key_column is not None and key_column not in names:
        raise InputError(
            f"{where}: no column {key_column!r} for --key-column; columns: {', '.join(names)}"
        )
    key = key_column or next(
        (
            c
            for c in KEY_COLUMNS
            if c in names
            and (_is_text(schema.field(c).type) or pa.types.is_integer(schema.field(c).type))
        ),
        None,
    )
    taken = {image, label, caption, key}
    # Other image-like columns are bytes, not metadata: kept out of the JSON.
    metadata = tuple(n for n in names if n not in taken and kinds[n] is None)
    derived = tuple(
        n
        for n in metadata
        if n in class_names
        or n.lower() in LABEL_DERIVED_NAMES
        or (label is not None and n.lower().startswith(f"{label.lower()}_"))
    )
    return HFLayout(
        image=image,
        image_kind=kind,
        label=label,
        caption=caption,
        key=key,
        class_names=class_names,
        metadata=metadata,
        label_derived=derived,
    )


def _feature_type(feature: Any) -> str | None:
    return feature.get("_type") if isinstance(feature, dict) else None


def _is_text(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


def batch_records(
    batch: Any,
    layout: HFLayout,
    *,
    source: str,
    shard: Shard,
    kind: LocatorKind,
    path: str,
    unit: int,
    first_row: int,
    file_row: int,
) -> Iterator[Record]:
    """Records of an Arrow record batch read from ``path``.

    ``unit`` is the row group (Parquet) or record batch (Arrow stream) the rows belong to,
    ``first_row`` the first row's position inside it, ``file_row`` its position in the file
    (used for keys when the table has no key column).
    """
    for i, row in enumerate(batch.to_pylist()):
        locator = Locator(
            kind=kind, path=path, offset=unit, size=first_row + i, member=layout.image
        )
        yield row_record(
            row,
            layout,
            source=source,
            shard=shard,
            locator=locator,
            position_key=f"{shard.name}#{file_row + i}",
        )


def row_record(
    row: Mapping[str, Any],
    layout: HFLayout,
    *,
    source: str,
    shard: Shard,
    locator: Locator,
    position_key: str,
) -> Record:
    """One row as a record carrying its image bytes (or the reason it has none)."""
    key = (text_value(row.get(layout.key)) if layout.key else None) or position_key
    metadata: dict[str, Any] = {}
    for name in layout.metadata:
        value = row.get(name)
        metadata[name] = (
            layout.label_name(name, value) if name in layout.class_names else json_safe(value)
        )
    label = layout.label_name(layout.label, row.get(layout.label)) if layout.label else None
    derived = _label_derived(layout, metadata, label)
    if derived:
        metadata[LABEL_DERIVED_KEY] = derived
    cell = row.get(layout.image)
    data: bytes | None
    if layout.image_kind == "struct" and isinstance(cell, Mapping):
        data = cell.get("bytes")
        image_path = text_value(cell.get("path"))
        if image_path:
            metadata["image_path"] = image_path
    else:
        data, image_path = (cell if isinstance(cell, bytes) else None), None
    fields: dict[str, Any] = {
        "caption": text_value(row.get(layout.caption)) if layout.caption else None,
        "label": label,
        "metadata": metadata,
    }
    if data:
        return Record(key, source, shard.name, locator, data=bytes(data), **fields)
    local = _image_beside(image_path, os.path.dirname(locator.path or "")) if image_path else None
    if local is not None:
        return Record(key, source, shard.name, Locator(kind="file", path=local), **fields)
    reason = f"{locator.uri()}: the row has no image bytes"
    if image_path:
        reason += (
            f" (only a path, {image_path!r}, not a file inside the dataset's folder); "
            "save the dataset with its images embedded"
        )
    return Record(key, source, shard.name, Locator(kind="none"), error=reason, **fields)


def _label_derived(layout: HFLayout, metadata: Mapping[str, Any], label: str | None) -> list[str]:
    """The row's metadata columns that restate its label: by name or type, or holding exactly it."""
    same = _plain(label) if label else None
    return [
        name
        for name in layout.metadata
        if name in layout.label_derived
        or (same is not None and _plain(text_value(metadata.get(name))) == same)
    ]


def _plain(text: str | None) -> str | None:
    return " ".join(text.casefold().replace("_", " ").split()) if text else None


def _image_beside(image_path: str, folder: str) -> str | None:
    """An image the row names only by path, when it is a file inside the data file's folder.

    Never elsewhere: a dataset must not make the server read (and serve thumbnails of) files
    outside the folder it was allowed to open.
    """
    if not folder:
        return None
    candidate = os.path.normpath(os.path.join(folder, image_path))
    real, base = os.path.realpath(candidate), os.path.realpath(folder)
    if not real.startswith(base.rstrip(os.sep) + os.sep) or not os.path.isfile(real):
        return None
    return candidate
