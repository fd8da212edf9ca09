"""A workspace: the home folder (SQLite DB, FAISS stores) plus the database it points at."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from splitaudit.indexer.db.engine import make_engine, make_session_factory, sqlite_url
from splitaudit.indexer.db.migrate import at_head, create_new_sqlite, upgrade
from splitaudit.indexer.errors import UsageError

DEFAULT_HOME = Path(".splitaudit")
_CORPUS_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_corpus_name(name: str) -> str:
    """Return ``name`` if it is a valid corpus name, else raise ``UsageError``."""
    if not _CORPUS_NAME.match(name):
        raise UsageError(
            f"invalid corpus name {name[:80]!r}{'...' if len(name) > 80 else ''}: use 1-200 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass
class Workspace:
    """Home folder + database engine + session factory, built once per process."""

    home: Path
    database_url: str
    engine: Engine
    sessions: sessionmaker[Session]

    @classmethod
    def open(
        cls, home: Path, database_url: str | None = None, *, migrate: bool = True
    ) -> Workspace:
        """Open (creating if needed) the workspace; runs migrations unless ``migrate=False``."""
        home = Path(home)
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create home folder {home}: {exc.strerror}") from exc
        url = database_url or sqlite_url(home)
        engine = make_engine(url)  # validates the URL before migrations touch anything
        # A second process creating the same new home waits in create_new_sqlite and then
        # finds it at head: the schema is created once.
        if (
            migrate
            and not at_head(engine)
            and not create_new_sqlite(engine)
            and not at_head(engine)
        ):
            upgrade(url)
        return cls(
            home=home, database_url=url, engine=engine, sessions=make_session_factory(engine)
        )

    def corpus_dir(self, corpus: str) -> Path:
        """Folder holding the FAISS stores and vector batches of ``corpus``."""
        return self.home / "corpora" / check_corpus_name(corpus)

    def uploads_dir(self) -> Path:
        """Folder where uploaded splits are unpacked."""
        return self.home / "splits"

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self.engine.dispose()
