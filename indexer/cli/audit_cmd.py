"""``splitaudit audit``: audit a test split (locally or through a server) and gate CI on the result."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from indexer.cli.backend_option import backend_option, export_cache_dir
from indexer.cli.common import (
    EXIT_GATE_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    handle_errors,
    home_option,
    open_workspace,
)
from indexer.errors import AuthError, IndexUnavailableError, UsageError
from indexer.gate.baseline import Baseline, load_baseline
from indexer.gate.evaluate import GateResult, apply_gate, evaluate
from indexer.gate.policy import Policy, load_policy, load_policy_file, parse_threshold_options
from indexer.gate.summary import summary_paragraph


def parse_rate(value: str | None) -> float | None:
    """``0.01`` or ``1%`` -> 0.01; ``UsageError`` when it is not a number."""
    if value is None:
        return None
    text = value.strip()
    scale = 100.0 if text.endswith("%") else 1.0
    try:
        return float(text.rstrip("%")) / scale
    except ValueError:
        raise UsageError(f"--max-rate takes a fraction (0.01) or a percentage (1%), got {value!r}") from None


def build_policy(*, policy_file: Path | None, fail_on: str | None, max_rate: str | None,
                 max_count: int | None, thresholds: Sequence[str], baseline: Path | None) -> Policy:
    """The policy file's policy (explicit, else the nearest one) with the command-line flags on top."""
    base = load_policy_file(policy_file) if policy_file else load_policy(Path.cwd())
    policy = base.with_overrides(fail_on=fail_on, max_rate=parse_rate(max_rate), max_count=max_count,
                                 thresholds=parse_threshold_options(thresholds), baseline=baseline)
    if policy.thresholds:
        from indexer.audit.thresholds import Thresholds

        Thresholds.from_mapping(dict(policy.thresholds))  # refuse unknown tiers before any work
    return policy


def _write(path: Path, text: str) -> None:
    """Write a report file; ``UsageError`` when the path cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _append_step_summary(markdown: str) -> None:
    """Append the Markdown report to ``$GITHUB_STEP_SUMMARY`` (GitHub Actions) when set."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(markdown + "\n")
    except OSError as exc:
        click.secho(f"warning: cannot append to GITHUB_STEP_SUMMARY ({target}): {exc.strerror or exc}",
                    fg="yellow", err=True)


def _local_report(split: Path, *, corpora: Sequence[str], home: Path, labels: Path | None,
                  label_names: Path | None, thresholds: Mapping[str, float], workers: int,
                  backend: str = "auto") -> dict[str, Any]:
    """Run the audit in-process against the index in ``home`` and return its report."""
    from indexer.audit.report import audit_report
    from indexer.audit.service import create_audit, create_split, run_audit
    from indexer.embed.backends import backend_embedder_factory
    from indexer.sources.labels_csv import load_labels_csv
    from indexer.sources.open import open_split

    if not home.is_dir():
        raise IndexUnavailableError(
            f"no splitaudit index at {home}: build it with `splitaudit index SOURCE --corpus NAME "
            f"--home {home}` (or restore it from your CI cache), or audit through --server"
        )
    factory = backend_embedder_factory(backend, export_cache_dir(home))  # unknown backend: exit 2 now
    label_map = load_labels_csv(labels) if labels else None
    params: dict[str, Any] = {}
    if label_names:
        from indexer.labels.names import load_label_names

        params["label_names"] = load_label_names(label_names)
    with tempfile.TemporaryDirectory(prefix="splitaudit-split-") as workdir:
        source = open_split(split, workdir=workdir, labels=label_map)
        ws = open_workspace(home)
        try:
            split_id = create_split(ws, source, name=split.resolve().name or str(split), labels=label_map,
                                    root=str(split))
            audit_id = create_audit(ws, split_id=split_id, corpora=corpora, thresholds=dict(thresholds),
                                    params=params)
            with tqdm(total=100, desc="auditing", unit="%", dynamic_ncols=True, disable=None,
                      mininterval=0.5, bar_format="{l_bar}{bar}| {elapsed} {postfix}") as bar:

                def progress(fraction: float, message: str) -> None:
                    bar.n = round(100 * fraction)
                    bar.set_postfix_str(message, refresh=False)
                    bar.refresh()

                run_audit(ws, audit_id, progress=progress, workers=workers,
                          embedder_factory=factory)
            with ws.sessions() as session:
                return audit_report(session, audit_id)
        finally:
            ws.close()


def _server_report(split: Path, *, corpora: Sequence[str], server: str, labels: Path | None,
                   label_names: Path | None, thresholds: Mapping[str, float]) -> dict[str, Any]:
    """Upload the split to ``server``, wait for the audit and download its report."""
    from indexer.gate.client import AuditClient

    with AuditClient(server, token=os.environ.get("SPLITAUDIT_TOKEN") or None) as client:
        upload = tqdm(unit="B", unit_scale=True, unit_divisor=1024, desc="uploading", dynamic_ncols=True,
                      disable=None, mininterval=0.5)

        def start_upload(total: int) -> Any:
            upload.reset(total=total)
            return upload.update

        try:
            audit_id = client.submit(split, corpora=corpora, labels=labels, label_names=label_names,
                                     thresholds=thresholds, progress=start_upload)
        finally:
            upload.close()
        click.echo(f"audit {audit_id} queued on {client.base_url}", err=True)
        with tqdm(total=100, desc=f"audit {audit_id}", unit="%", dynamic_ncols=True, disable=None,
                  mininterval=0.5, bar_format="{l_bar}{bar}| {elapsed} {postfix}") as bar:

            def progress(fraction: float, message: str) -> None:
                bar.n = round(100 * fraction)
                bar.set_postfix_str(message, refresh=False)
                bar.refresh()

            client.wait(audit_id, on_progress=progress)
        return client.report(audit_id)


def _exit_code(result: GateResult) -> int:
    """0 passed, 1 failed, 3 when no verdict can be given (e.g. a failing tier was skipped)."""
    if result.errors:
        return EXIT_INTERNAL
    return EXIT_OK if result.passed else EXIT_GATE_FAILED


@click.command()
@click.argument("split", type=click.Path(path_type=Path))
@click.option("--corpus", "corpora", multiple=True, required=True,
              help="Corpus to audit against (repeat for several).")
@home_option
@click.option("--server", metavar="URL",
              help="Audit through a splitaudit server instead of a local index (token from SPLITAUDIT_TOKEN).")
@click.option("--labels", type=click.Path(dir_okay=False, path_type=Path),
              help="CSV 'key,label' giving the test images' labels (overrides folder labels).")
@click.option("--label-names", type=click.Path(dir_okay=False, path_type=Path),
              help="JSON/CSV mapping label ids to names and synonyms (e.g. n02123045 -> tabby, tabby cat).")
@click.option("--fail-on", metavar="TIERS",
              help="Comma-separated tiers that fail the gate: exact,near,semantic,label_leak or all "
                   "[default: exact,near, or the policy file's].")
@click.option("--max-rate", metavar="R",
              help="Fraction (0.01) or percentage (1%) of test images allowed to be flagged [default: 0].")
@click.option("--max-count", type=click.IntRange(min=0), metavar="N",
              help="Number of test images allowed to be flagged.")
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Matching threshold handed to the audit (repeatable), e.g. semantic_cosine=0.9 or phash_hamming=6.")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Policy file to use instead of the nearest splitaudit.toml / pyproject.toml.")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path),
              help="Baseline JSON of reviewed false positives to suppress (see `splitaudit baseline export`).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the JSON report (splitaudit.report/v1 + a gate section).")
@click.option("--junit", "junit_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write JUnit XML: one testcase per test image.")
@click.option("--markdown", "markdown_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write CSV: one row per match, plus one per clean or unreadable image.")
@click.option("--workers", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Processes for reading and hashing the split (local mode).")
@backend_option
@click.pass_context
@handle_errors
def audit(ctx: click.Context, split: Path, corpora: tuple[str, ...], home: Path, server: str | None,
          labels: Path | None, label_names: Path | None, fail_on: str | None, max_rate: str | None,
          max_count: int | None, thresholds: tuple[str, ...], policy_file: Path | None,
          baseline: Path | None, json_out: Path | None, junit_out: Path | None,
          markdown_out: Path | None, csv_out: Path | None, workers: int, backend: str) -> None:
    """Audit SPLIT (folder, ImageFolder, manifest or zip/tar archive) for leakage into a corpus.

    Exit status: 0 the gate passed, 1 it failed (leakage above the policy), 2 usage or
    input error, 3 server, index or internal error. The policy comes from splitaudit.toml
    or [tool.splitaudit] in pyproject.toml (nearest above the working directory), with
    these flags on top.
    """
    if server and ctx.get_parameter_source("home") == click.core.ParameterSource.COMMANDLINE:
        raise UsageError("give either --home (local index) or --server URL, not both")
    policy = build_policy(policy_file=policy_file, fail_on=fail_on, max_rate=max_rate, max_count=max_count,
                          thresholds=thresholds, baseline=baseline)
    known = load_baseline(policy.baseline) if policy.baseline else Baseline()
    for path in (labels, label_names):
        if path is not None and not path.is_file():
            raise UsageError(f"{path} does not exist")
    if server:
        try:
            report = _server_report(split, corpora=corpora, server=server, labels=labels,
                                    label_names=label_names, thresholds=policy.thresholds)
        except AuthError as exc:
            raise UsageError(str(exc)) from exc  # a refused token is the caller's to fix: exit 2
    else:
        report = _local_report(split, corpora=corpora, home=home, labels=labels, label_names=label_names,
                               thresholds=policy.thresholds, workers=workers, backend=backend)
    result = evaluate(report, policy, known)
    gated = apply_gate(report, result)
    from indexer.audit.formats import render_csv, render_json, render_junit, render_markdown

    markdown = render_markdown(gated)
    for path, text in ((json_out, lambda: render_json(gated)), (junit_out, lambda: render_junit(gated)),
                       (markdown_out, lambda: markdown), (csv_out, lambda: render_csv(gated))):
        if path is not None:
            _write(path, text())
    _append_step_summary(markdown)
    click.echo(summary_paragraph(report, result, corpora=corpora))
    sys.exit(_exit_code(result))
