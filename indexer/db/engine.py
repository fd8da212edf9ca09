"""Engine and session factory for the provenance DB (SQLite with WAL by default, or PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.extras import install_hint


def sqlite_url(home: Path) -> str:
    """The default database URL: a SQLite file inside ``home``."""
    return f"sqlite:///{(home / 'splitaudit.db').resolve()}"


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine; SQLite gets WAL, foreign keys and a busy timeout."""
    if not url.startswith(("sqlite", "postgresql")):
        raise UsageError(
            f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql+psycopg://..."
        )
    kwargs: dict[str, Any] = {"echo": echo, "future": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"timeout": 60, "check_same_thread": False}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except ModuleNotFoundError as exc:  # the PostgreSQL driver is an extra of the light core
        raise UsageError(
            f"a PostgreSQL database needs its driver ({exc.name} not installed): "
            f"install it with `{install_hint('postgres')}`"
        ) from None
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory bound to ``engine`` (objects stay usable after commit)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with factory() as session, session.begin():
        yield session
