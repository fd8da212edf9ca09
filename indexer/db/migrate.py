"""Run Alembic migrations programmatically (``splitaudit db upgrade`` and first use)."""

from __future__ import annotations

import sys
from pathlib import Path

from alembic import command
from alembic.config import Config

# A checkout (or editable install) has them at the top level; an installed wheel carries them
# as data files under ``<prefix>/share/splitaudit/migrations`` (see pyproject.toml).
_CHECKOUT_MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
MIGRATIONS_DIR = (
    _CHECKOUT_MIGRATIONS
    if (_CHECKOUT_MIGRATIONS / "env.py").is_file()
    else Path(sys.prefix) / "share" / "splitaudit" / "migrations"
)


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at this project's ``migrations/`` and ``url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Upgrade the database at ``url`` to ``revision`` (idempotent)."""
    command.upgrade(alembic_config(url), revision)
