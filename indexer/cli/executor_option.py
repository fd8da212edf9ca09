"""``--executor local|ray`` and ``--ray-address``: where a command's work runs (index, audit, dedup)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from splitaudit.indexer.pipeline.ray_match import Executor

EXECUTORS = ("local", "ray")
RAY_ADDRESS_HELP = (
    "Ray cluster to join (e.g. auto); default: start a local Ray instance of --workers CPUs."
)
_F = TypeVar("_F", bound=Callable[..., Any])


def executor_options(help_text: str, address_help: str = RAY_ADDRESS_HELP) -> Callable[[_F], _F]:
    """The ``--executor`` (default ``local``) and ``--ray-address`` options, with a command's
    own help text for ``--executor``."""

    def decorate(command: _F) -> _F:
        command = click.option("--ray-address", metavar="ADDRESS", help=address_help)(command)
        return click.option(
            "--executor",
            type=click.Choice(EXECUTORS),
            default="local",
            show_default=True,
            help=help_text,
        )(command)

    return decorate


def executor_of(
    executor: str, ray_address: str | None, *, workers: int, actors: int | None = None
) -> Executor:
    """The ``Executor`` the options name (``workers``: CPUs of a local Ray instance)."""
    from splitaudit.indexer.pipeline.ray_match import Executor

    return Executor(
        "ray" if executor == "ray" else "local",
        ray_address=ray_address,
        workers=workers,
        actors=actors,
    )
