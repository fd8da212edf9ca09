"""Alembic environment: the URL comes from the config (set by ``splitaudit.indexer.db.migrate``) or settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic import context
from sqlalchemy import engine_from_config, event, pool

from splitaudit.indexer.db.engine import sqlite_url
from splitaudit.indexer.db.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    env_url = os.environ.get("SPLITAUDIT_DATABASE_URL")
    if env_url:
        return env_url
    return sqlite_url(Path(os.environ.get("SPLITAUDIT_HOME", ".splitaudit")))


def run_migrations_offline() -> None:
    """Emit SQL without a connection (``alembic upgrade --sql``)."""
    context.configure(
        url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True
    )
    with context.begin_transaction():
        context.run_migrations()


def _sqlite_wal(dbapi_conn: Any, _record: Any) -> None:
    """WAL without a sync per commit, as the app runs it: pysqlite commits each DDL statement
    on its own, and in the default rollback journal every one of them costs fsyncs (0.6 s of
    the ~0.9 s a new database took). Foreign keys stay off here: batch table copies need it."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def run_migrations_online() -> None:
    """Run migrations against a live connection."""
    section = config.get_section(config.config_ini_section) or {}
    section["sqlalchemy.url"] = _url()
    connectable = engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
    if connectable.dialect.name == "sqlite":
        event.listen(connectable, "connect", _sqlite_wal)
    with connectable.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
