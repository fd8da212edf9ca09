"""Alembic migrations create exactly the schema the models describe (no drift)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from splitaudit.indexer.db.engine import make_engine, sqlite_url
from splitaudit.indexer.db.migrate import upgrade
from splitaudit.indexer.db.models import Base


def _diff(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))
    finally:
        engine.dispose()


def test_sqlite_migrations_match_models(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    assert _diff(url) == []


def test_upgrade_is_idempotent_and_creates_all_tables(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    upgrade(url)
    engine = make_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert set(Base.metadata.tables) <= tables
    assert "alembic_version" in tables


@pytest.mark.postgres
def test_postgres_migrations_match_models(pg_url: str) -> None:
    upgrade(pg_url)
    assert _diff(pg_url) == []


def test_head_revision_constant_is_alembics_head(tmp_path: Path) -> None:
    """Adding a migration without bumping HEAD_REVISION would open new databases un-migrated."""
    from alembic.script import ScriptDirectory

    from splitaudit.indexer.db.migrate import HEAD_REVISION, alembic_config

    script = ScriptDirectory.from_config(alembic_config(sqlite_url(tmp_path)))
    assert script.get_heads() == [HEAD_REVISION]


def test_at_head_only_after_a_full_upgrade(tmp_path: Path) -> None:
    from splitaudit.indexer.db.migrate import at_head

    url = sqlite_url(tmp_path)
    engine = make_engine(url)
    try:
        assert not at_head(engine)  # new, empty database
        upgrade(url, "0002")
        assert not at_head(engine)  # behind: Workspace.open must still migrate
        upgrade(url)
        assert at_head(engine)
    finally:
        engine.dispose()


def test_a_new_sqlite_database_is_built_at_head_like_the_migrations_build_it(
    tmp_path: Path,
) -> None:
    from alembic.runtime.migration import MigrationContext as Ctx

    from splitaudit.indexer.db.migrate import HEAD_REVISION, at_head, create_new_sqlite
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(tmp_path / "fast")  # takes the create_new_sqlite path
    try:
        assert at_head(ws.engine)
        with ws.engine.connect() as conn:
            assert Ctx.configure(conn).get_current_revision() == HEAD_REVISION
        assert _diff(ws.database_url) == []  # same tables, columns, indexes as the models
        assert not create_new_sqlite(ws.engine)  # never twice: the database is not empty
    finally:
        ws.close()
    migrated = sqlite_url(tmp_path)
    upgrade(migrated)
    engines = [make_engine(ws.database_url), make_engine(migrated)]
    try:
        shapes = []
        for engine in engines:
            insp = inspect(engine)
            shapes.append(
                {
                    t: (
                        sorted(c["name"] for c in insp.get_columns(t)),
                        sorted(str(i["name"]) for i in insp.get_indexes(t)),
                        sorted(str(u["name"]) for u in insp.get_unique_constraints(t)),
                        sorted(str(f["referred_table"]) for f in insp.get_foreign_keys(t)),
                    )
                    for t in insp.get_table_names()
                }
            )
        assert shapes[0] == shapes[1]
    finally:
        for engine in engines:
            engine.dispose()
    upgrade(ws.database_url)  # Alembic agrees it has nothing to do
