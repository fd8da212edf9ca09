"""``--device auto|cpu|cuda|cuda:N|mps`` (env ``SPLITAUDIT_DEVICE``) for the commands that embed."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

if TYPE_CHECKING:
    from splitaudit.indexer.embed.device import ResolvedDevice

F = TypeVar("F", bound=Callable[..., object])

device_option: Callable[[F], F] = click.option(
    "--device",
    default="auto",
    show_default=True,
    envvar="SPLITAUDIT_DEVICE",
    metavar="DEVICE",
    help="Where images are embedded: auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps "
    "(env SPLITAUDIT_DEVICE). An absent device is a usage error.",
)


def resolve_cli_device(requested: str) -> ResolvedDevice:
    """The device ``--device`` names (imports torch: call only when something will be embedded)."""
    from splitaudit.indexer.embed.device import resolve_device

    return resolve_device(requested)
