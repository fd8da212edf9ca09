"""What the before / after benches share: another checkout's library imported in place of the
installed one, and the ``splitaudit`` CLI run in this process."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path


def use_library(checkout: Path) -> None:
    """Import ``splitaudit`` from another checkout (the editable install's finder, remapped).

    setuptools names the finder after the version installed, which may not be the version the
    checkout now declares (a bump without a reinstall): it is found by its prefix."""
    names = sorted(
        m.name
        for m in pkgutil.iter_modules()
        if m.name.startswith("__editable___splitaudit_") and m.name.endswith("_finder")
    )
    if not names:
        raise SystemExit("--before / --after need splitaudit installed editable (pip install -e .)")
    importlib.import_module(names[-1]).MAPPING.update(
        {
            "splitaudit": str(checkout / "indexer" / "public"),
            "splitaudit.app": str(checkout / "app"),
            "splitaudit.indexer": str(checkout / "indexer"),
        }
    )


def cli_in_process(*argv: str) -> None:
    """Run one ``splitaudit`` command in this process (the CLI contract: stable across
    versions); the audit gate's exit code 1 is a verdict, not a failure."""
    from splitaudit.indexer.cli.main import cli

    try:
        cli.main(list(argv), prog_name="splitaudit", standalone_mode=False)
    except SystemExit as exc:
        if exc.code not in (0, 1, None):
            raise
