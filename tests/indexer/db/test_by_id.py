"""Rows looked up by id through the DB-API cursor: the same values the ORM reads, on SQLite
and PostgreSQL (JSON parsed, booleans as booleans, filters applied, ids in many statements)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from splitaudit.indexer.db import by_id
from splitaudit.indexer.db.by_id import rows_by_id
from splitaudit.indexer.db.engine import make_engine, make_session_factory
from splitaudit.indexer.db.models import Base, Corpus, Item, Shard


def _session(url: str) -> Iterator[Session]:
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    try:
        with make_session_factory(engine)() as s:
            yield s
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    url = (
        f"sqlite:///{tmp_path / 'ids.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    yield from _session(url)


def _seed(s: Session, n: int = 40) -> list[int]:
    corpus = Corpus(name="c", generation=1)
    s.add(corpus)
    s.flush()
    shard = Shard(corpus_id=corpus.id, source="/data", name="00000")
    s.add(shard)
    s.flush()
    items = [
        Item(
            corpus_id=corpus.id,
            shard_id=shard.id,
            key=f"k{i}.jpg",
            locator={"kind": "file", "path": f"/data/k{i}.jpg", "size": 1000 + i},
            sha256=None if i % 5 == 0 else f"{i:064x}",
            phash=None if i % 7 == 0 else (-(2**62) + i if i % 2 else 2**62 + i),
            width=100 + i,
            height=50 + i,
            has_embedding=i % 3 == 0,
        )
        for i in range(n)
    ]
    s.add_all(items)
    s.commit()
    return [it.id for it in items]


def _orm(s: Session, columns: list[Any], ids: list[int], *where: Any) -> list[tuple[Any, ...]]:
    query = select(Item.id, *columns).where(Item.id.in_(ids), *where)
    return [tuple(r) for r in s.execute(query)]


def _hashable(rows: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    return {tuple(repr(v) if isinstance(v, dict) else v for v in r) for r in rows}


def test_values_match_the_orm_across_statements(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _seed(session)
    monkeypatch.setattr(by_id, "ID_CHUNK", 7)  # 40 ids: six statements
    wanted = [*ids[::-1], ids[3], 10**9]  # any order, a repeat, an id with no row
    columns = [Item.key, Item.locator, Item.sha256, Item.phash, Item.has_embedding]
    got = list(rows_by_id(session, columns, wanted))
    assert len(got) == len(ids)  # each row once; the missing id left out
    assert _hashable(got) == _hashable(_orm(session, columns, ids))
    row = next(r for r in got if r[0] == ids[4])
    assert row[2] == {"kind": "file", "path": "/data/k4.jpg", "size": 1004}  # parsed JSON
    assert row[4] == 2**62 + 4 and row[5] is False  # 64-bit hash, a boolean
    negative = next(r for r in got if r[0] == ids[1])
    assert negative[4] == -(2**62) + 1


def test_where_clauses_filter(session: Session) -> None:
    ids = _seed(session)
    got = dict(rows_by_id(session, [Item.phash], ids, where=[Item.phash.is_not(None)]))
    expected = dict(_orm(session, [Item.phash], ids, Item.phash.is_not(None)))
    assert got == expected
    assert len(got) == len(ids) - len(ids[::7])  # every 7th has no pHash


def test_no_ids_no_statement(session: Session) -> None:
    _seed(session, n=3)
    assert list(rows_by_id(session, [Item.key], [])) == []
