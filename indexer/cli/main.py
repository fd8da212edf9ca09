"""``splitaudit`` entry point: the command group and its subcommands."""

from __future__ import annotations

import logging

import click

from indexer import __version__
from indexer.cli.db_cmd import db
from indexer.cli.index_cmd import index


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="splitaudit")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """splitaudit: find out whether a test split leaked into a pretraining corpus.

    Index a corpus once (`splitaudit index`), then audit splits against it locally
    (`splitaudit audit`) or through the server (`splitaudit serve`).
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


cli.add_command(index)
cli.add_command(db)


def _register_optional() -> None:
    """Commands living in modules that other parts of the CLI build on."""
    import importlib

    for module, name in (
        ("indexer.cli.audit_cmd", "audit"),
        ("indexer.cli.dedup_cmd", "dedup"),
        ("indexer.cli.demo_cmd", "demo"),
        ("indexer.cli.baseline_cmd", "baseline"),
        ("indexer.cli.serve_cmd", "serve"),
        ("indexer.cli.serve_cmd", "worker"),
        ("indexer.cli.models_cmd", "models"),
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        cli.add_command(getattr(mod, name))


_register_optional()


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="splitaudit")


if __name__ == "__main__":
    main()
