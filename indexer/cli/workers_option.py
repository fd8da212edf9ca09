"""``--workers N|auto``: how many processes read, decode and hash images."""

from __future__ import annotations

from typing import Any

import click

from splitaudit.indexer.cpus import usable_cpus

MAX_WORKERS = 256
AUTO_CAP = 32  # beyond this the DB writer in the main process is the bottleneck


class WorkersType(click.ParamType):
    """A process count 1..256, or ``auto``."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) or value == "auto":
            return value
        try:
            count = int(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a number of processes or 'auto'", param, ctx)
        if not 1 <= count <= MAX_WORKERS:
            self.fail(f"{count} is not in 1..{MAX_WORKERS}", param, ctx)
        return count


def resolve_workers(value: int | str) -> int:
    """``auto``: one process per usable CPU (at most ``AUTO_CAP``).

    Also when the forward pass runs on this CPU: decoding and resizing cost about as much CPU
    per image as an exported efficientnet-lite0 forward, and in the main process they would
    run between forward passes instead of beside them (measured on 2 CPUs, OpenVINO: 1,000
    JPEGs in 19-20 s with 2 workers against 22.6-23.0 s with 1). The pool keeps at most two
    batches in flight, so idle workers cost nothing.
    """
    if value != "auto":
        return int(value)
    return min(usable_cpus(), AUTO_CAP)


def workers_option_with(help_text: str) -> Any:
    """The ``--workers N|auto`` option (default ``auto``) with a command's own help text."""
    return click.option(
        "--workers", type=WorkersType(), default="auto", show_default=True, help=help_text
    )


workers_option = workers_option_with(
    "Processes for reading, decoding and hashing (Ray: actors). auto: one per CPU (Ray "
    "with embeddings: one actor, each actor loads the model)."
)
