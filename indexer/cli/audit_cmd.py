"""``splitaudit audit``: audit a test split (locally or through a server) and gate CI on the result."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from tqdm import tqdm

from splitaudit.indexer.cli.backend_option import backend_option
from splitaudit.indexer.cli.common import (
    EXIT_GATE_FAILED,
    EXIT_INTERNAL,
    EXIT_OK,
    handle_errors,
    home_option,
    open_workspace,
)
from splitaudit.indexer.cli.device_option import device_option, resolve_cli_device
from splitaudit.indexer.cli.executor_option import executor_of, executor_options
from splitaudit.indexer.cli.progress import fraction_progress, progress_options
from splitaudit.indexer.cli.workers_option import resolve_workers, workers_option_with
from splitaudit.indexer.errors import IndexUnavailableError, UsageError
from splitaudit.indexer.gate.baseline import Baseline, load_baseline
from splitaudit.indexer.gate.evaluate import GateResult, evaluate
from splitaudit.indexer.gate.policy import (
    Policy,
    load_policy,
    load_policy_file,
    parse_threshold_options,
)
from splitaudit.indexer.gate.summary import summary_paragraph
from splitaudit.indexer.reporting.models import GateView, Report, as_report

if TYPE_CHECKING:
    from splitaudit.indexer.embed.device import ResolvedDevice
    from splitaudit.indexer.pipeline.ray_match import Executor
    from splitaudit.indexer.reporting.html_thumbs import EmbeddedImage, Side, ThumbnailFetcher

    Thumbs = dict[tuple[Side, int], EmbeddedImage]


def parse_rate(value: str | None, flag: str = "--max-rate") -> float | None:
    """``0.01`` or ``1%`` -> 0.01; ``UsageError`` when it is not a number."""
    if value is None:
        return None
    text = value.strip()
    scale = 100.0 if text.endswith("%") else 1.0
    try:
        return float(text.rstrip("%")) / scale
    except ValueError:
        raise UsageError(
            f"{flag} takes a fraction (0.01) or a percentage (1%), got {value!r}"
        ) from None


def build_policy(
    *,
    policy_file: Path | None,
    fail_on: str | None,
    max_rate: str | None,
    max_count: int | None,
    thresholds: Sequence[str],
    baseline: Path | None,
    max_unreadable: int | None = None,
    max_unreadable_rate: str | None = None,
) -> Policy:
    """The policy file's policy (explicit, else the nearest one) with the command-line flags on top."""
    base = load_policy_file(policy_file) if policy_file else load_policy(Path.cwd())
    policy = base.with_overrides(
        fail_on=fail_on,
        max_rate=parse_rate(max_rate),
        max_count=max_count,
        thresholds=parse_threshold_options(thresholds),
        baseline=baseline,
        max_unreadable=max_unreadable,
        max_unreadable_rate=parse_rate(max_unreadable_rate, "--max-unreadable-rate"),
    )
    if policy.thresholds:
        from splitaudit.indexer.captions.query import split_caption_thresholds
        from splitaudit.indexer.match.thresholds import Thresholds

        other, _ = split_caption_thresholds(dict(policy.thresholds))
        Thresholds.from_mapping(other)  # refuse unknown tiers before any work
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
        click.secho(
            f"warning: cannot append to GITHUB_STEP_SUMMARY ({target}): {exc.strerror or exc}",
            fg="yellow",
            err=True,
        )


def _local_report(
    split: Path,
    *,
    corpora: Sequence[str],
    home: Path,
    labels: Path | None,
    label_names: Path | None,
    thresholds: Mapping[str, float],
    workers: int,
    progress_opts: dict[str, Any],
    html: bool,
    device: Callable[[], ResolvedDevice],
    image_column: str | None = None,
    key_column: str | None = None,
    backend: str = "auto",
    allow_empty: bool = False,
    executor: Executor | None = None,
) -> tuple[Report, Thumbs]:
    """Run the audit in-process against the index in ``home``: its report, and the HTML's
    thumbnails. ``executor``: where the matching runs (here, or on Ray actors)."""
    from splitaudit.indexer.audit.service import run_audit, submit_audit
    from splitaudit.indexer.embed.backends import resolve_backend
    from splitaudit.indexer.reporting.html_thumbs import db_thumbnail_fetcher
    from splitaudit.indexer.reporting.report import build_report
    from splitaudit.indexer.runtime.embedders import embedder_factory
    from splitaudit.indexer.sources.labels_csv import load_labels_csv
    from splitaudit.indexer.sources.open import split_location

    if not home.is_dir():
        raise IndexUnavailableError(
            f"no splitaudit index at {home}: build it with `splitaudit index SOURCE --corpus NAME "
            f"--home {home}` (or restore it from your CI cache), or audit through --server"
        )
    resolve_backend(backend)  # an uninstalled backend: exit 2 now, before any work
    label_map = load_labels_csv(labels) if labels else None
    params: dict[str, Any] = {"allow_empty": True} if allow_empty else {}
    if label_names:
        from splitaudit.indexer.labels.names import load_label_names

        params["label_names"] = load_label_names(label_names)
    with tempfile.TemporaryDirectory(prefix="splitaudit-split-") as workdir:
        location = split_location(
            split, workdir=workdir, image_column=image_column, key_column=key_column
        )
        if key_column is not None and f"#key_column={key_column}" not in location:
            raise UsageError(
                f"--key-column applies to Hugging Face datasets (Parquet, save_to_disk, hf://); "
                f"{split} is not one (manifests take a 'key' column)"
            )
        ws = open_workspace(home)
        try:
            audit_id = submit_audit(
                ws,
                split_uri=location,
                name=split.resolve().name or str(split),
                corpora=corpora,
                labels=label_map,
                root=str(split),
                thresholds=dict(thresholds),
                params=params,
            )

            factory = embedder_factory(home, backend=backend, device=device)
            with fraction_progress("auditing", **progress_opts) as progress:
                run_audit(
                    ws,
                    audit_id,
                    progress=progress,
                    workers=workers,
                    embedder_factory=factory,
                    executor=executor,
                )
            with ws.sessions() as session:
                report = build_report(session, audit_id)
                # Read now: an archive split's files live in the temporary folder.
                return report, _thumbnails(report, db_thumbnail_fetcher(session)) if html else {}
        finally:
            ws.close()


def _server_report(
    split: Path,
    *,
    corpora: Sequence[str],
    server: str,
    labels: Path | None,
    label_names: Path | None,
    thresholds: Mapping[str, float],
    progress_opts: dict[str, Any],
    html: bool,
    allow_empty: bool = False,
) -> tuple[Report, Thumbs]:
    """Upload the split to ``server``, wait for the audit: its report, and the HTML's thumbnails."""
    from splitaudit.indexer.gate.client import AuditClient

    with AuditClient(server, token=os.environ.get("SPLITAUDIT_TOKEN") or None) as client:
        upload = tqdm(
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc="uploading",
            dynamic_ncols=True,
            disable=True if progress_opts["quiet"] else None,
            mininterval=0.5,
        )

        def start_upload(total: int) -> Any:
            upload.reset(total=total)
            return upload.update

        try:
            audit_id = client.submit(
                split,
                corpora=corpora,
                labels=labels,
                label_names=label_names,
                thresholds=thresholds,
                progress=start_upload,
                allow_empty=allow_empty,
            )
        finally:
            upload.close()
        click.echo(f"audit {audit_id} queued on {client.base_url}", err=True)
        with fraction_progress(f"audit {audit_id}", **progress_opts) as progress:
            client.wait(audit_id, on_progress=progress)
        report = as_report(client.report(audit_id))
        return report, _thumbnails(report, client.thumbnail) if html else {}


def _thumbnails(report: Report, fetch: ThumbnailFetcher) -> Thumbs:
    """The HTML page's thumbnails, fetched now (a temporary split folder goes away)."""
    from splitaudit.indexer.reporting.html_report import pair_thumbnails

    return pair_thumbnails(report, fetch)


def _check_usage(
    ctx: click.Context,
    *,
    server: str | None,
    columns: tuple[str | None, str | None],
    files: tuple[Path | None, Path | None],
) -> None:
    """Refuse option combinations that cannot work, before any work (exit 2)."""
    given = {
        name
        for name in ("home", "device", "executor", "ray_address")
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    }
    if server and "home" in given:
        raise UsageError("give either --home (local index) or --server URL, not both")
    if server and "device" in given:
        raise UsageError("--device applies to local audits; a server embeds on its own --device")
    if server and given & {"executor", "ray_address"}:
        raise UsageError("--executor and --ray-address apply to local audits, not --server")
    for path in files:
        if path is not None and not path.is_file():
            raise UsageError(f"{path} does not exist")
    if server and any(columns):
        raise UsageError(
            "--image-column and --key-column apply to local audits; with --server, audit a "
            "split folder on the server whose columns are found by type"
        )


def _write_reports(
    report: Report,
    gate: GateView,
    thumbs: Thumbs,
    *,
    outputs: Mapping[str, Path | None],
    html_out: Path | None,
) -> None:
    """Every requested report file, rendered with the gate's verdict; the Markdown also goes to
    the GitHub step summary when there is one."""
    from splitaudit.indexer.reporting.formats import render
    from splitaudit.indexer.reporting.html_report import render_html

    markdown = render(report, "md", gate=gate)
    for fmt, path in outputs.items():
        if path is not None:
            _write(path, markdown if fmt == "md" else render(report, fmt, gate=gate))
    if html_out is not None:
        _write(html_out, render_html(report, thumbnails=thumbs, gate=gate))
    _append_step_summary(markdown)


def _embedded(report: Report) -> bool:
    """Whether the audit embedded the split (some corpus has a usable semantic tier)."""
    return (report.model or {}).get("semantic") in ("ok", "partial")


def _exit_code(result: GateResult) -> int:
    """0 passed, 1 failed, 3 when no verdict can be given (e.g. a failing tier was skipped)."""
    if result.errors:
        return EXIT_INTERNAL
    return EXIT_OK if result.passed else EXIT_GATE_FAILED


@click.command()
@click.argument("split", type=click.Path(path_type=Path))
@click.option(
    "--corpus",
    "corpora",
    multiple=True,
    required=True,
    help="Corpus to audit against (repeat for several).",
)
@home_option
@click.option(
    "--server",
    metavar="URL",
    help="Audit through a splitaudit server instead of a local index (token from SPLITAUDIT_TOKEN).",
)
@click.option(
    "--labels",
    type=click.Path(dir_okay=False, path_type=Path),
    help="CSV 'key,label' giving the test images' labels (overrides folder labels).",
)
@click.option(
    "--label-names",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON/CSV mapping label ids to names and synonyms (e.g. n02123045 -> tabby, tabby cat).",
)
@click.option(
    "--fail-on",
    metavar="TIERS",
    help="Comma-separated tiers that fail the gate: exact,near,semantic,label_leak or all "
    "[default: exact,near, or the policy file's].",
)
@click.option(
    "--max-rate",
    metavar="R",
    help="Fraction (0.01) or percentage (1%) of test images allowed to be flagged [default: 0].",
)
@click.option(
    "--max-count",
    type=click.IntRange(min=0),
    metavar="N",
    help="Number of test images allowed to be flagged.",
)
@click.option(
    "--max-unreadable",
    type=click.IntRange(min=0),
    metavar="N",
    help="Test images allowed to be unreadable (so not audited) [default: 0: any fails the gate].",
)
@click.option(
    "--max-unreadable-rate",
    metavar="R",
    help="Fraction (0.01) or percentage (1%) of test images allowed to be unreadable.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Let the audit pass when it checks nothing (no readable test image, or a corpus with "
    "no indexed image) instead of failing with exit 2.",
)
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="NAME=VALUE",
    help="Matching threshold handed to the audit (repeatable), e.g. semantic_cosine=0.9 or phash_hamming=6.",
)
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Policy file to use instead of the nearest splitaudit.toml / pyproject.toml.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Baseline JSON of reviewed false positives to suppress (see `splitaudit baseline export`).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSON report (splitaudit.report/v1 + a gate section).",
)
@click.option(
    "--junit",
    "junit_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write JUnit XML: one testcase per test image.",
)
@click.option(
    "--markdown",
    "markdown_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set).",
)
@click.option(
    "--csv",
    "csv_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write CSV: one row per match, plus one per clean or unreadable image.",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write one self-contained HTML page (thumbnails inline, no network): summary, tier "
    "counts and the flagged pairs side by side (first 500, strongest first).",
)
@click.option(
    "--corpus-blocklist",
    "blocklists",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the corpus items matched at the failing tiers (.txt keys, .csv/.parquet "
    "corpus,key,url,shard), to filter the corpus before training. Repeatable.",
)
@click.option(
    "--clean-split",
    "clean_splits",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the test items with no match at the failing tiers (.txt keys, .csv manifest "
    "key,path,label). Repeatable.",
)
@workers_option_with(
    "Processes for reading, decoding and hashing the split (local mode); auto: one per CPU "
    "(they decode the next images while this process embeds)."
)
@click.option(
    "--image-column",
    metavar="NAME",
    help="Hugging Face dataset split: the column holding the image bytes, when its type does "
    "not tell (local mode).",
)
@click.option(
    "--key-column",
    metavar="NAME",
    help="Hugging Face dataset split (local mode): the column whose values key the rows "
    "(default: a key / id column when there is one, else FILE#ROW).",
)
@device_option
@backend_option
@executor_options(
    "Local mode: where the split is matched against the corpus. local: this process; ray: "
    "query batches searched and verified on Ray actors, one per CPU of the cluster (pip install "
    "'splitaudit[ray]'); the same matches either way."
)
@progress_options
@click.pass_context
@handle_errors
def audit(
    ctx: click.Context,
    split: Path,
    corpora: tuple[str, ...],
    home: Path,
    server: str | None,
    labels: Path | None,
    label_names: Path | None,
    fail_on: str | None,
    max_rate: str | None,
    max_count: int | None,
    max_unreadable: int | None,
    max_unreadable_rate: str | None,
    allow_empty: bool,
    thresholds: tuple[str, ...],
    policy_file: Path | None,
    baseline: Path | None,
    json_out: Path | None,
    junit_out: Path | None,
    markdown_out: Path | None,
    csv_out: Path | None,
    html_out: Path | None,
    blocklists: tuple[Path, ...],
    clean_splits: tuple[Path, ...],
    workers: int | str,
    image_column: str | None,
    key_column: str | None,
    device: str,
    backend: str,
    executor: str,
    ray_address: str | None,
    quiet: bool,
    progress_interval: float,
) -> None:
    """Audit SPLIT (folder, ImageFolder, manifest, zip/tar archive, or a Hugging Face dataset:
    Parquet, save_to_disk folder, hf://datasets/OWNER/NAME[@REV][/PATH]) for leakage into a corpus.

    Exit status: 0 the gate passed, 1 it failed (leakage above the policy, or test images
    that could not be read beyond --max-unreadable), 2 usage or
    input error, 3 server, index or internal error. The policy comes from splitaudit.toml
    or [tool.splitaudit] in pyproject.toml (nearest above the working directory), with
    these flags on top.
    """
    _check_usage(
        ctx, server=server, columns=(image_column, key_column), files=(labels, label_names)
    )
    policy = build_policy(
        policy_file=policy_file,
        fail_on=fail_on,
        max_rate=max_rate,
        max_count=max_count,
        thresholds=thresholds,
        baseline=baseline,
        max_unreadable=max_unreadable,
        max_unreadable_rate=max_unreadable_rate,
    )
    known = load_baseline(policy.baseline) if policy.baseline else Baseline()
    progress_opts: dict[str, Any] = {"quiet": quiet, "interval_s": progress_interval}
    if server:
        report, thumbs = _server_report(
            split,
            corpora=corpora,
            server=server,
            labels=labels,
            label_names=label_names,
            thresholds=policy.thresholds,
            progress_opts=progress_opts,
            html=html_out is not None,
            allow_empty=allow_empty,
        )
    else:
        # torch is imported only when a corpus has embeddings; a named device is checked up front.
        resolved = functools.cache(functools.partial(resolve_cli_device, device))
        if device.strip().lower() not in ("auto", "cpu"):
            resolved()
        n_workers = resolve_workers(workers)
        run_on = executor_of(executor, ray_address, workers=n_workers)
        report, thumbs = _local_report(
            split,
            corpora=corpora,
            home=home,
            labels=labels,
            label_names=label_names,
            thresholds=policy.thresholds,
            workers=n_workers,
            progress_opts=progress_opts,
            html=html_out is not None,
            device=resolved,
            image_column=image_column,
            key_column=key_column,
            backend=backend,
            allow_empty=allow_empty,
            executor=run_on,
        )
    result = evaluate(report, policy, known)
    gate = result.view()  # the verdict: a value of its own, rendered beside the report
    outputs = {"json": json_out, "junit": junit_out, "md": markdown_out, "csv": csv_out}
    _write_reports(report, gate, thumbs, outputs=outputs, html_out=html_out)
    if blocklists or clean_splits:
        from splitaudit.indexer.gate.decontaminate import write_decontamination

        write_decontamination(
            report,
            policy.fail_on,
            split=split,
            blocklists=blocklists,
            clean_splits=clean_splits,
            gate=gate,
        )
    click.echo(summary_paragraph(report, result, corpora=corpora))
    if not server and _embedded(report):
        click.echo(f"Embedded on {resolved().summary()}.")
    sys.exit(_exit_code(result))
