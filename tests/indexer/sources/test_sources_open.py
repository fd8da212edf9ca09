"""open_source / open_split dispatch, labels.csv and manifests inside splits, load_labels_csv."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from splitaudit.indexer.errors import InputError, UsageError
from splitaudit.indexer.sources.archive import ArchiveSource
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.labels_csv import LabelledSource
from splitaudit.indexer.sources.manifest import ManifestSource
from splitaudit.indexer.sources.open import load_labels_csv, open_source, open_split
from splitaudit.indexer.sources.record import Record, Source
from splitaudit.indexer.sources.webdataset import WebDatasetSource


def image_bytes(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def write_files(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def write_tar(path: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def write_zip(path: Path, files: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def all_records(src: Source) -> dict[str, Record]:
    return {r.key: r for s in src.shards() for r in src.records(s)}


IMAGEFOLDER = {"cat/a.png": image_bytes(1), "dog/b.png": image_bytes(2)}


def test_open_source_dispatch(tmp_path: Path) -> None:
    write_files(tmp_path / "folder", IMAGEFOLDER)
    assert isinstance(open_source(tmp_path / "folder"), FolderSource)

    (tmp_path / "m.csv").write_text("path\na.png\n")
    (tmp_path / "m.jsonl").write_text('{"url": "https://x/1.jpg"}\n')
    pq.write_table(pa.table({"path": ["a.png"]}), tmp_path / "m.parquet")
    for name in ("m.csv", "m.jsonl", "m.parquet"):
        assert isinstance(open_source(str(tmp_path / name)), ManifestSource)

    (tmp_path / "shards").mkdir()
    write_tar(tmp_path / "shards" / "00000.tar", {"0.jpg": image_bytes(1), "0.json": b"{}"})
    assert isinstance(open_source(tmp_path / "shards"), WebDatasetSource)
    assert isinstance(open_source(tmp_path / "shards" / "00000.tar"), WebDatasetSource)

    write_tar(tmp_path / "plain.tar", IMAGEFOLDER)
    write_zip(tmp_path / "plain.zip", IMAGEFOLDER)
    assert isinstance(open_source(tmp_path / "plain.tar"), ArchiveSource)
    assert isinstance(open_source(tmp_path / "plain.zip"), ArchiveSource)

    emb = tmp_path / "emb"
    (emb / "img_emb").mkdir(parents=True)
    (emb / "metadata").mkdir()
    np.save(emb / "img_emb" / "img_emb_0.npy", np.zeros((1, 4), np.float16))
    pq.write_table(pa.table({"url": ["u"]}), emb / "metadata" / "metadata_0.parquet")
    assert isinstance(open_source(emb), PrecomputedEmbeddingSource)


def test_open_source_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        open_source(tmp_path / "missing")
    (tmp_path / "x.bin").write_bytes(b"\x00\x01")
    with pytest.raises(InputError, match="cannot tell"):
        open_source(tmp_path / "x.bin")


def test_open_split_imagefolder_folder(tmp_path: Path) -> None:
    write_files(tmp_path, IMAGEFOLDER)
    records = all_records(open_split(tmp_path))
    assert {k: r.label for k, r in records.items()} == {"cat/a.png": "cat", "dog/b.png": "dog"}


def test_open_split_labels_csv_and_override(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {"a.png": image_bytes(1), "b.png": image_bytes(2), "labels.csv": b"key,label\na.png,owl\n"},
    )
    split = open_split(tmp_path)
    assert isinstance(split, LabelledSource)
    records = all_records(split)
    assert (records["a.png"].label, records["b.png"].label) == ("owl", None)
    records = all_records(open_split(tmp_path, labels={"b": "cow"}))
    assert (records["a.png"].label, records["b.png"].label) == ("owl", "cow")


def test_open_split_manifest_file(tmp_path: Path) -> None:
    write_files(tmp_path, {"img/a.png": image_bytes(1)})
    (tmp_path / "split.jsonl").write_text(
        json.dumps({"path": "img/a.png", "key": "a", "label": "x"}) + "\n"
    )
    records = all_records(open_split(tmp_path / "split.jsonl"))
    assert records["a"].label == "x" and records["a"].error is None


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_open_split_archive_with_manifest(tmp_path: Path, kind: str) -> None:
    files = {
        "test/img/a.png": image_bytes(1),
        "test/manifest.jsonl": (
            json.dumps({"path": "img/a.png", "label": "owl", "source": "flickr"}) + "\n"
        ).encode(),
    }
    arc = tmp_path / f"split.{kind}"
    write_zip(arc, files) if kind == "zip" else write_tar(arc, files)
    split = open_split(arc, workdir=tmp_path / "work")
    assert isinstance(split, ManifestSource)
    (rec,) = all_records(split).values()
    assert (rec.key, rec.label, rec.metadata) == ("img/a.png", "owl", {"source": "flickr"})
    assert rec.read_bytes() == files["test/img/a.png"]


def test_open_split_archive_imagefolder(tmp_path: Path) -> None:
    arc = tmp_path / "split.zip"
    write_zip(arc, IMAGEFOLDER)
    records = all_records(open_split(arc, workdir=tmp_path / "work"))
    assert {k: r.label for k, r in records.items()} == {"cat/a.png": "cat", "dog/b.png": "dog"}


def test_open_split_archive_needs_workdir(tmp_path: Path) -> None:
    write_zip(tmp_path / "s.zip", IMAGEFOLDER)
    with pytest.raises(UsageError, match="workdir"):
        open_split(tmp_path / "s.zip")


def test_open_split_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        open_split(tmp_path / "nope")
    (tmp_path / "x.bin").write_bytes(b"nothing")
    with pytest.raises(InputError, match="not a folder, a manifest"):
        open_split(tmp_path / "x.bin")


def test_load_labels_csv(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("\ufefflabel,key\ncat,a.png\n\ndog,b.png\n", encoding="utf-8")
    assert load_labels_csv(path) == {"a.png": "cat", "b.png": "dog"}
    path.write_text("key,label,notes\na.png,cat,x\nb.png,dog\n")
    assert load_labels_csv(path) == {"a.png": "cat", "b.png": "dog"}


@pytest.mark.parametrize(
    "text,match",
    [
        (
            "name,class\na,b\n",
            "line 1: a labels file needs a header row naming columns 'key' and 'label'",
        ),
        ("a.png,cat\n", "line 1: a labels file needs a header row"),
        ("key,label\na\n", "line 2: expected 'key,label'"),
        ("key,label\na,x\na,y\n", "line 3: key 'a' has two labels"),
        ("key,label\n,x\n", "line 2: empty key"),
        ("key,label\n", "no 'key,label' rows"),
    ],
)
def test_load_labels_csv_errors(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        load_labels_csv(path)


def test_load_labels_csv_missing_and_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_labels_csv(tmp_path / "none.csv")
    (tmp_path / "l.csv").write_bytes(b"key,label\na,caf\xe9\n")
    with pytest.raises(InputError, match="UTF-8"):
        load_labels_csv(tmp_path / "l.csv")


def test_folder_with_a_stray_tar_stays_a_folder(tmp_path: Path) -> None:
    write_files(tmp_path, {**IMAGEFOLDER, "backup.tar": b""})
    assert isinstance(open_source(tmp_path), FolderSource)
