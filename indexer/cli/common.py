"""Shared CLI plumbing: options, workspace opening, error -> exit code translation."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from splitaudit.indexer.errors import (
    EXIT_GATE_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    SplitauditError,
)
from splitaudit.indexer.workspace import DEFAULT_HOME, Workspace

__all__ = [
    "EXIT_GATE_FAILED",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "database_url",
    "exit_code_for",
    "handle_errors",
    "home_option",
    "open_workspace",
]
F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("splitaudit")

home_option = click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SPLITAUDIT_HOME",
    default=DEFAULT_HOME,
    show_default=True,
    help="Folder holding the SQLite DB and FAISS stores (env SPLITAUDIT_HOME).",
)


def database_url() -> str | None:
    """``SPLITAUDIT_DATABASE_URL`` if set (PostgreSQL for teams), else None (SQLite in home)."""
    return os.environ.get("SPLITAUDIT_DATABASE_URL") or None


def open_workspace(home: Path) -> Workspace:
    """Open the workspace named by ``--home`` and the environment."""
    return Workspace.open(home, database_url())


def exit_code_for(exc: SplitauditError) -> int:
    """The CLI exit code of a library error: the class's own ``exit_code`` (2 usage/input, 3 internal)."""
    return exc.exit_code


def handle_errors(fn: F) -> F:
    """Turn library errors into a one-line message and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SplitauditError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            click.secho("interrupted; run the same command again to resume", fg="yellow", err=True)
            sys.exit(130)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as exc:
            from splitaudit.indexer.jobs.queue import job_error_text

            # The full text (SQL, parameters, reprs) only with --verbose / the log.
            log.debug("internal error", exc_info=True)
            click.secho(job_error_text(exc), fg="red", err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]
