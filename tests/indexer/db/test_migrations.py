"""Alembic migrations create exactly the schema the models describe (no drift)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from indexer.db.engine import make_engine, sqlite_url
from indexer.db.migrate import upgrade
from indexer.db.models import Base


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

    from indexer.db.migrate import HEAD_REVISION, alembic_config

    script = ScriptDirectory.from_config(alembic_config(sqlite_url(tmp_path)))
    assert script.get_heads() == [HEAD_REVISION]


def test_at_head_only_after_a_full_upgrade(tmp_path: Path) -> None:
    from indexer.db.migrate import at_head

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
