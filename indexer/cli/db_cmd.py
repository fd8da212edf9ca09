"""``splitaudit db``: database maintenance."""

from __future__ import annotations

from pathlib import Path

import click

from splitaudit.indexer.cli.common import database_url, handle_errors, home_option
from splitaudit.indexer.db.engine import sqlite_url
from splitaudit.indexer.db.migrate import upgrade as run_upgrade


@click.group()
def db() -> None:
    """Database maintenance (migrations)."""


@db.command()
@home_option
@handle_errors
def upgrade(home: Path) -> None:
    """Upgrade the provenance database to the latest schema (idempotent)."""
    home.mkdir(parents=True, exist_ok=True)
    url = database_url() or sqlite_url(home)
    run_upgrade(url)
    click.echo(f"database at {_redact(url)} is at the latest schema")


def _redact(url: str) -> str:
    """Hide a password in a database URL."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
