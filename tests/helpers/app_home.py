"""Fresh home folders for API/UI tests: a copy of a database migrated once per test process."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings
from splitaudit.indexer.workspace import Workspace

DB_NAME = "splitaudit.db"


@functools.lru_cache(maxsize=1)
def _template_db() -> Path:
    """A database migrated once per test process (Alembic takes about a second per run)."""
    folder = Path(tempfile.mkdtemp(prefix="splitaudit-template-"))
    atexit.register(shutil.rmtree, folder, True)
    Workspace.open(folder).close()
    return folder / DB_NAME


def new_home(tmp_path: Path) -> Path:
    """A fresh home folder holding a copy of the migrated template database."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(_template_db(), home / DB_NAME)
    return home


@contextmanager
def app_client(home: Path, **settings: Any) -> Iterator[TestClient]:
    """A TestClient over ``create_app`` (lifespan run; no job worker unless asked)."""
    settings.setdefault("run_worker", False)
    app = create_app(ApiSettings(home=home, **settings))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
