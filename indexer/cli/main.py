"""``splitaudit`` entry point: the command group and its subcommands.

Subcommands are imported when they are run (or listed by ``--help``), not at start-up: a
command then pays only for its own imports (``splitaudit index`` never imports the gate,
the report writers or the server).
"""

from __future__ import annotations

import importlib
import logging

import click

from splitaudit.indexer import __version__

# name -> "module:attribute", in the order --help lists them.
COMMANDS = {
    "index": "splitaudit.indexer.cli.index_cmd:index",
    "audit": "splitaudit.indexer.cli.audit_cmd:audit",
    "dedup": "splitaudit.indexer.cli.dedup_cmd:dedup",
    "demo": "splitaudit.indexer.cli.demo_cmd:demo",
    "baseline": "splitaudit.indexer.cli.baseline_cmd:baseline",
    "serve": "splitaudit.indexer.cli.serve_cmd:serve",
    "worker": "splitaudit.indexer.cli.serve_cmd:worker",
    "models": "splitaudit.indexer.cli.models_cmd:models",
    "db": "splitaudit.indexer.cli.db_cmd:db",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *sorted(set(self.commands) - set(COMMANDS))]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{COMMANDS[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="splitaudit")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """splitaudit: find out whether a test split leaked into a pretraining corpus.

    Index a corpus once (`splitaudit index`), then audit splits against it locally
    (`splitaudit audit`) or through the server (`splitaudit serve`).
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # a container's CPU quota (or SPLITAUDIT_CPUS) for FAISS's, torch's and BLAS's own pools
    from splitaudit.indexer.cpus import limit_native_threads
    from splitaudit.indexer.errors import UsageError

    try:
        limit_native_threads()
    except UsageError as exc:
        raise click.UsageError(str(exc)) from exc


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="splitaudit")


if __name__ == "__main__":
    main()
