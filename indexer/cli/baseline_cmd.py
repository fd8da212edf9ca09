"""``splitaudit baseline``: write a baseline of reviewed false positives for offline gating."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from splitaudit.indexer.cli.common import handle_errors, home_option, open_workspace
from splitaudit.indexer.errors import InputError, NotFoundError, UsageError
from splitaudit.indexer.gate.baseline import (
    baseline_from_report,
    load_baseline,
    merge_baselines,
    write_baseline,
)


@click.group()
def baseline() -> None:
    """Baselines: reviewed `not_duplicate` matches the gate should not count again."""


def _read_report(path: Path) -> dict[str, Any]:
    """A JSON report file (``splitaudit.report/v1``, e.g. written by ``audit --json``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"{path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(data, dict) or data.get("schema") != "splitaudit.report/v1":
        raise InputError(
            f"{path} is not a splitaudit report (expected schema splitaudit.report/v1)"
        )
    return data


def _local_report(home: Path, audit_id: int) -> dict[str, Any]:
    """The report of an audit stored in the local workspace."""
    from splitaudit.indexer.db.models import Audit
    from splitaudit.indexer.reporting.report import audit_report

    if not home.is_dir():
        raise UsageError(f"no splitaudit home at {home}; pass --home DIR or --server URL")
    ws = open_workspace(home)
    try:
        with ws.sessions() as session:
            if session.get(Audit, audit_id) is None:
                raise NotFoundError(f"audit {audit_id} does not exist in {home}")
            return audit_report(session, audit_id)
    finally:
        ws.close()


@baseline.command("export")
@click.argument("audit_id", type=int, required=False)
@click.option(
    "--from-report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the reviewed audit from a JSON report file instead of a server or home.",
)
@click.option(
    "--server", metavar="URL", help="Server holding the audit (token from SPLITAUDIT_TOKEN)."
)
@home_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Baseline file to write.",
)
@click.option(
    "--merge",
    is_flag=True,
    help="Keep the entries already in OUTPUT and add the new ones (default: replace).",
)
@click.pass_context
@handle_errors
def export(
    ctx: click.Context,
    audit_id: int | None,
    report_path: Path | None,
    server: str | None,
    home: Path,
    output: Path,
    merge: bool,
) -> None:
    """Write the `not_duplicate` verdicts of audit AUDIT_ID (or of --from-report FILE) as a baseline.

    The baseline names each pair by the test image's content hash and the corpus item, so
    `splitaudit audit --baseline FILE` suppresses them offline, even after files move.
    """
    if (audit_id is None) == (report_path is None):
        raise UsageError("give either AUDIT_ID or --from-report FILE")
    if server and ctx.get_parameter_source("home") == click.core.ParameterSource.COMMANDLINE:
        raise UsageError("give either --home or --server, not both")
    origin: dict[str, Any]
    if report_path is not None:
        report = _read_report(report_path)
        origin = {"report": str(report_path), "audit_id": report.get("audit_id")}
    elif server:
        from splitaudit.indexer.gate.client import AuditClient

        assert audit_id is not None
        with AuditClient(server, token=os.environ.get("SPLITAUDIT_TOKEN") or None) as client:
            report = client.report(audit_id)
        origin = {"server": server, "audit_id": audit_id}
    else:
        assert audit_id is not None
        report = _local_report(home, audit_id)
        origin = {"home": str(home), "audit_id": audit_id}
    found = baseline_from_report(report)
    if merge and output.exists():
        found = merge_baselines([load_baseline(output), found])
    write_baseline(output, found, origin=origin)
    click.echo(
        f"wrote {len(found.entries)} baseline entr{'y' if len(found.entries) == 1 else 'ies'} to {output}"
    )


@baseline.command("prune")
@click.argument("baseline_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSON report of a recent audit (e.g. `audit --json`); entries matching nothing in it go.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the pruned baseline here (default: rewrite BASELINE_FILE).",
)
@handle_errors
def prune(baseline_file: Path, report_path: Path, output: Path | None) -> None:
    """Drop the stale entries of BASELINE_FILE: those that match nothing in --report."""
    from splitaudit.indexer.gate.baseline import Baseline
    from splitaudit.indexer.gate.evaluate import evaluate
    from splitaudit.indexer.gate.policy import Policy

    current = load_baseline(baseline_file)
    result = evaluate(_read_report(report_path), Policy(), current)
    stale = set(result.stale)
    kept = Baseline(entries=tuple(e for e in current.entries if e not in stale))
    write_baseline(output or baseline_file, kept, origin={"pruned_with": str(report_path)})
    click.echo(
        f"removed {len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'}, "
        f"kept {len(kept.entries)} in {output or baseline_file}"
    )
