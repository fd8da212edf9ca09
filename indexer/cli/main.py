"""``splitaudit`` entry point: the command group and its subcommands."""

from __future__ import annotations

import logging

import click

from indexer import __version__
from indexer.cli.audit_cmd import audit
from indexer.cli.baseline_cmd import baseline
from indexer.cli.db_cmd import db
from indexer.cli.dedup_cmd import dedup
from indexer.cli.demo_cmd import demo
from indexer.cli.index_cmd import index
from indexer.cli.models_cmd import models
from indexer.cli.serve_cmd import serve, worker


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


for command in (index, audit, dedup, demo, baseline, serve, worker, models, db):
    cli.add_command(command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="splitaudit")


if __name__ == "__main__":
    main()
