"""What the before / after benches share: another checkout's library imported in place of the
installed one, and the ``splitaudit`` CLI run in this process."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


def audit_in_subprocess(
    module: str, root: Path, home: Path, checkout: Path | None
) -> dict[str, Any]:
    """``python -m module --audit-only HOME.json --root ROOT [--library CHECKOUT]`` (offline, from
    the repository root): the bench's audit with one library, in a process of its own; what it
    wrote back."""
    out = home.with_suffix(".json")
    command = [sys.executable, "-m", module, "--audit-only", str(out), "--root", str(root)]
    if checkout is not None:
        command += ["--library", str(checkout)]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    subprocess.run(command, check=True, env=env, cwd=Path(__file__).resolve().parent.parent)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def add_audit_only_options(parser: argparse.ArgumentParser) -> None:
    """The hidden options ``audit_in_subprocess`` passes to the bench it starts."""
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--library", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--audit-only", type=Path, help=argparse.SUPPRESS)


def audit_only(args: argparse.Namespace, run: Callable[[Path, Path], dict[str, Any]]) -> bool:
    """In a process ``audit_in_subprocess`` started: the library swapped in, ``run(root, home)``
    written back as JSON; True. False in the bench's own process."""
    if not args.audit_only:
        return False
    if args.library:
        use_library(args.library)
    outcome = run(args.root, args.audit_only.with_suffix(""))
    args.audit_only.write_text(json.dumps(outcome))
    return True
