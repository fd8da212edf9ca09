"""Committing a shard's result with a claim: exactly once, also when two committers race."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import func, select

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, Item, Shard, VectorBatch
from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
from splitaudit.indexer.pipeline.extract import extract_record
from splitaudit.indexer.pipeline.rows import PreparedBatch, commit_batches, prepare_batch
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.record import Shard as ShardDesc
from splitaudit.indexer.workspace import Workspace


def _shard(tmp_path: Path, url: str | None) -> tuple[Workspace, dict, ShardDesc]:
    root = tmp_path / "corpus"
    (root / "a").mkdir(parents=True)
    for s in range(5):
        photo(s, (64, 48)).save(root / "a" / f"{s}.jpg", quality=90)
    ws = Workspace.open(tmp_path / "home", url)
    with transaction(ws.sessions) as s:
        corpus = ensure_corpus(s, name="c", model_id="m", dim=3)
        corpus_id, shard_id = (
            corpus.id,
            ensure_shard(s, corpus=corpus, source=str(root), name="a").id,
        )
    src = FolderSource(root)
    desc = next(iter(src.shards()))
    extracted = [extract_record(r, keep_image=False) for r in src.records(desc)]
    plain = prepare_batch(extracted)
    batch = PreparedBatch(items=plain.items, vectors=[[1.0, 0.0, 0.0]] * len(plain.items))  # type: ignore[arg-type]
    common = dict(
        corpus_id=corpus_id, shard_id=shard_id, corpus_dir=ws.corpus_dir("c"), batches=[batch]
    )
    return ws, common, desc


def _check_once(ws: Workspace, common: dict, desc: ShardDesc) -> None:
    with ws.sessions() as s:
        assert s.scalar(select(func.count(Item.id))) == 5
        assert s.scalar(select(func.count(VectorBatch.id))) == 1
        row = s.get_one(Shard, common["shard_id"])
        assert (row.status, row.fingerprint, row.item_count) == ("done", desc.fingerprint, 5)
        assert s.get_one(Corpus, common["corpus_id"]).generation == 1


def _race(ws: Workspace, common: dict, claim: str) -> list[bool]:
    barrier = threading.Barrier(2)
    results: list[bool] = []

    def commit() -> None:
        barrier.wait()
        results.append(commit_batches(ws, **common, claim=claim))

    threads = [threading.Thread(target=commit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_second_commit_of_a_claimed_shard_writes_nothing(tmp_path: Path) -> None:
    ws, common, desc = _shard(tmp_path, None)
    assert commit_batches(ws, **common, claim=desc.fingerprint) is True
    assert commit_batches(ws, **common, claim=desc.fingerprint) is False
    _check_once(ws, common, desc)
    assert len(list((ws.corpus_dir("c") / "vectors").glob("*.npz"))) == 1


def test_racing_committers_sqlite(tmp_path: Path) -> None:
    ws, common, desc = _shard(tmp_path, None)
    assert sorted(_race(ws, common, desc.fingerprint)) == [False, True]
    _check_once(ws, common, desc)


@pytest.mark.postgres
def test_racing_committers_postgres(tmp_path: Path, pg_url: str) -> None:
    ws, common, desc = _shard(tmp_path, pg_url)
    try:
        assert sorted(_race(ws, common, desc.fingerprint)) == [False, True]
        _check_once(ws, common, desc)
    finally:
        ws.close()
