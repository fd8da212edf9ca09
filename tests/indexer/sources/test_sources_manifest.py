"""ManifestSource: CSV / JSONL / Parquet rows, path resolution, chunks, bad rows and bad manifests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.manifest import ManifestSource
from splitaudit.indexer.sources.record import Record


def write_image(path: Path, seed: int = 0) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(path)
    return path.read_bytes()


def all_records(source: ManifestSource) -> list[Record]:
    return [r for shard in source.shards() for r in source.records(shard)]


def test_csv_columns_metadata_and_relative_paths(tmp_path: Path) -> None:
    data = write_image(tmp_path / "img" / "a.png")
    (tmp_path / "m.csv").write_text(
        'path,caption,label,license,photographer\nimg/a.png,"a cat, sitting",cat,CC-BY,Ann\n',
        encoding="utf-8",
    )
    (rec,) = all_records(ManifestSource(tmp_path / "m.csv"))
    assert rec.key == "img/a.png"
    assert (rec.caption, rec.label, rec.license) == ("a cat, sitting", "cat", "CC-BY")
    assert rec.metadata == {"photographer": "Ann"}
    assert rec.locator.kind == "file" and rec.error is None
    assert rec.read_bytes() == data


def test_csv_key_column_and_url_rows(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text(
        "key,url,caption\nk1,https://example.com/1.jpg,one\n,https://example.com/2.jpg,two\n"
    )
    recs = all_records(ManifestSource(tmp_path / "m.csv"))
    assert [r.key for r in recs] == ["k1", "https://example.com/2.jpg"]
    assert recs[0].locator.kind == "url" and recs[0].url == "https://example.com/1.jpg"


def test_root_overrides_manifest_folder(tmp_path: Path) -> None:
    write_image(tmp_path / "data" / "a.png")
    (tmp_path / "m.csv").write_text("path\na.png\n")
    (rec,) = all_records(ManifestSource(tmp_path / "m.csv", root=tmp_path / "data"))
    assert rec.error is None and rec.locator.path == str(tmp_path / "data" / "a.png")


def test_missing_file_row_is_error_record(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("path\nnowhere.png\n")
    (rec,) = all_records(ManifestSource(tmp_path / "m.csv"))
    assert rec.key == "nowhere.png"
    assert rec.error == f"file not found: {tmp_path / 'nowhere.png'}"


def test_missing_columns_raise_with_columns_found(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("file,caption\na.png,x\n")
    with pytest.raises(
        InputError, match=r"line 1: .*'path' or 'url'.*found columns: file, caption"
    ):
        ManifestSource(tmp_path / "m.csv")


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "m.xlsx").write_text("x")
    with pytest.raises(InputError, match="unknown manifest format"):
        ManifestSource(tmp_path / "m.xlsx")
    with pytest.raises(InputError, match="does not exist"):
        ManifestSource(tmp_path / "nope.csv")


def test_unparsable_csv_raises_with_line(tmp_path: Path) -> None:
    huge = "x" * 200_000  # over the csv module's field size limit
    (tmp_path / "m.csv").write_text(f"path\na.png\n{huge}.png\n")
    src = ManifestSource(tmp_path / "m.csv")
    with pytest.raises(InputError, match="line 3: bad CSV"):
        all_records(src)


def test_nul_byte_in_path_is_error_record(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("path\na\x00.png\n")
    (rec,) = all_records(ManifestSource(tmp_path / "m.csv"))
    assert rec.error is not None and rec.error.startswith("invalid path")


def test_csv_multiline_field_and_extra_fields(tmp_path: Path) -> None:
    write_image(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text('path,caption\na.png,"two\nlines"\nb.png,x,EXTRA\n')
    recs = all_records(ManifestSource(tmp_path / "m.csv"))
    assert recs[0].caption == "two\nlines"
    assert recs[1].key == "line:4" and "fields" in str(recs[1].error)


def test_jsonl_rows_metadata_and_bad_line(tmp_path: Path) -> None:
    write_image(tmp_path / "a.png")
    lines = [
        json.dumps({"path": "a.png", "label": 3, "tags": ["x", "y"], "score": float("nan")}),
        "",
        "{not json",
        json.dumps({"caption": "no path"}),
        json.dumps([1, 2]),
    ]
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    recs = all_records(ManifestSource(tmp_path / "m.jsonl"))
    assert recs[0].label == "3" and recs[0].metadata == {"tags": ["x", "y"], "score": None}
    assert recs[1].key == "line:3" and "not valid JSON" in str(recs[1].error)
    assert recs[2].key == "line:4" and "neither 'path' nor 'url'" in str(recs[2].error)
    assert recs[3].key == "line:5" and "JSON object" in str(recs[3].error)
    assert len({r.key for r in recs}) == 4


def test_jsonl_first_line_not_json_raises(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text("path,url\na,b\n")
    with pytest.raises(InputError, match="line 1"):
        ManifestSource(tmp_path / "m.jsonl")


def test_parquet_rows_and_metadata(tmp_path: Path) -> None:
    write_image(tmp_path / "a.png")
    table = pa.table(
        {
            "path": ["a.png", "b.png"],
            "label": [1, 2],
            "width": [8, 9],
            "blob": [b"\xff\x00", b"ok"],
        }
    )
    pq.write_table(table, tmp_path / "m.parquet")
    recs = all_records(ManifestSource(tmp_path / "m.parquet"))
    assert [r.key for r in recs] == ["a.png", "b.png"]
    assert recs[0].label == "1" and recs[0].metadata["width"] == 8
    assert recs[0].metadata["blob"].startswith("base64:") and recs[1].metadata["blob"] == "ok"
    assert recs[1].error is not None and "file not found" in recs[1].error
    json.dumps([dict(r.metadata) for r in recs])  # JSON-safe


def _rows(n: int) -> list[str]:
    return [f"img{i:05d}.png" for i in range(n)]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_chunks_cover_every_row_once(tmp_path: Path, fmt: str) -> None:
    names = _rows(25)
    path = tmp_path / f"m.{fmt}"
    if fmt == "csv":
        path.write_text("path\n" + "\n".join(names) + "\n")
    elif fmt == "jsonl":
        path.write_text("\n".join(json.dumps({"path": n}) for n in names) + "\n")
    else:
        pq.write_table(pa.table({"path": names}), path, row_group_size=7)
    src = ManifestSource(path, chunk_rows=10)
    shards = list(src.shards())
    assert [s.name for s in shards] == [
        "rows-000000-000009",
        "rows-000010-000019",
        "rows-000020-000024",
    ]
    assert [r.key for s in shards for r in src.records(s)] == names
    # a fresh instance (resumed run) reads one chunk without listing shards first
    again = ManifestSource(path, chunk_rows=10)
    assert [r.key for r in again.records(shards[1])] == names[10:20]


def test_default_chunk_name(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text("path\n" + "\n".join(_rows(3)) + "\n")
    assert [s.name for s in ManifestSource(tmp_path / "m.csv").shards()] == ["rows-000000-000002"]


def test_fingerprint_stable_and_changes_with_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("path\na.png\n")
    first = [s.fingerprint for s in ManifestSource(path).shards()]
    assert first == [s.fingerprint for s in ManifestSource(path).shards()]
    path.write_text("path\na.png\nb.png\n")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert [s.fingerprint for s in ManifestSource(path).shards()] != first


def test_duplicate_key_in_chunk_is_error_with_unique_key(tmp_path: Path) -> None:
    write_image(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text("path\na.png\na.png\n")
    recs = all_records(ManifestSource(tmp_path / "m.csv"))
    assert [r.key for r in recs] == ["a.png", "a.png#line3"]
    assert recs[0].error is None and "duplicate key" in str(recs[1].error)


def test_allowed_roots_refuse_paths_outside(tmp_path: Path) -> None:
    write_image(tmp_path / "inside" / "a.png")
    write_image(tmp_path / "outside.png")
    (tmp_path / "inside" / "m.csv").write_text("path\na.png\n../outside.png\n")
    src = ManifestSource(tmp_path / "inside" / "m.csv", allowed_roots=[tmp_path / "inside"])
    recs = all_records(src)
    assert recs[0].error is None
    assert "path not allowed" in str(recs[1].error)


def test_not_utf8_raises(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_bytes("path,caption\na.png,caf\xe9\n".encode("latin-1"))
    src = ManifestSource(tmp_path / "m.csv")
    with pytest.raises(InputError, match="line 2: not UTF-8"):
        list(src.shards())
