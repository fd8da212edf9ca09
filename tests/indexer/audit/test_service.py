"""``submit_audit``: a split and its queued audit in one transaction, from where the split is read."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import photo
from helpers.hf_layout import jpeg
from sqlalchemy import func, select

from splitaudit.indexer.audit.service import run_audit, submit_audit
from splitaudit.indexer.db.models import Audit, Job, Split, SplitItem
from splitaudit.indexer.errors import InputError, NotFoundError, UsageError
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.open import open_split, split_location
from splitaudit.indexer.workspace import Workspace


def _home_with_corpus(tmp_path: Path) -> Workspace:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        photo(i, (96, 64)).save(corpus / f"c{i}.jpg")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    return ws


def _count(ws: Workspace, model: type) -> int:
    with ws.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_a_refused_audit_stores_no_split(tmp_path: Path) -> None:
    ws = _home_with_corpus(tmp_path)
    with pytest.raises(NotFoundError, match="nope"):
        submit_audit(ws, split_uri=str(tmp_path / "corpus"), name="s", corpora=["nope"])
    with pytest.raises(UsageError, match="unknown threshold"):
        submit_audit(
            ws, split_uri=str(tmp_path / "corpus"), name="s", corpora=["c"], thresholds={"bogus": 1}
        )
    assert (_count(ws, Split), _count(ws, Audit), _count(ws, Job)) == (0, 0, 0)


def test_an_archive_split_is_audited_from_where_it_unpacked_with_the_given_labels(
    tmp_path: Path,
) -> None:
    ws = _home_with_corpus(tmp_path)
    archive = tmp_path / "split.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(tmp_path / "corpus" / "c0.jpg", "test/c0.jpg")
    location = split_location(archive, workdir=tmp_path / "work")
    assert Path(location).is_dir() and Path(location).is_relative_to((tmp_path / "work").resolve())

    audit_id = submit_audit(
        ws, split_uri=location, name="s", corpora=["c"], labels={"c0.jpg": "cat"}
    )
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        job = s.scalars(select(Job)).one()
        labels = s.scalars(select(SplitItem.label)).all()
    assert job.status == "done" and job.params == {"audit_id": audit_id}
    assert labels == ["cat"]


def test_split_location_refuses_what_is_not_a_split(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="not a folder, a manifest"):
        split_location(tmp_path / "notes.txt")
    with pytest.raises(InputError, match="does not exist"):
        split_location(tmp_path / "missing")


def test_split_location_of_a_dataset_keeps_its_image_column(tmp_path: Path) -> None:
    table = pa.table({"png": [jpeg(photo(1))], "thumb": [jpeg(photo(2))], "label": ["cat"]})
    pq.write_table(table, tmp_path / "two.parquet")

    uri = split_location(tmp_path / "two.parquet", image_column="thumb")
    source = open_split(uri)  # what the audit run reads, without the option
    records = [r for shard in source.shards() for r in source.records(shard)]

    assert [r.read_bytes() for r in records] == [jpeg(photo(2))]
    assert split_location(tmp_path / "two.parquet") == str((tmp_path / "two.parquet").resolve())


def test_the_first_read_of_a_parquet_split_reports_done_of_total(tmp_path: Path) -> None:
    ws = _home_with_corpus(tmp_path)
    split = tmp_path / "split" / "data" / "test-00000-of-00001.parquet"
    split.parent.mkdir(parents=True)
    pq.write_table(
        pa.table({"image": [jpeg(photo(i, (96, 64))) for i in range(5)]}),
        split,
        row_group_size=2,
    )
    audit_id = submit_audit(ws, split_uri=str(tmp_path / "split"), name="s", corpora=["c"])
    messages: list[str] = []
    run_audit(ws, audit_id, progress=lambda _fraction, message: messages.append(message))
    reads = [m for m in messages if m.startswith("read ")]
    assert reads and reads[-1] == "read 5/5 split images", messages
