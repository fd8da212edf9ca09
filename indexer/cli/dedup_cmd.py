"""``splitaudit dedup``: duplicate clusters within a corpus (or a folder / manifest / split), a drop list."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from splitaudit.indexer.cli.backend_option import backend_option, export_cache_dir
from splitaudit.indexer.cli.common import handle_errors, home_option, open_workspace
from splitaudit.indexer.cli.executor_option import executor_of, executor_options
from splitaudit.indexer.cli.index_cmd import DEFAULT_MODEL_SPEC
from splitaudit.indexer.cli.progress import counting_progress, fraction_progress, progress_options
from splitaudit.indexer.cli.workers_option import resolve_workers, workers_option
from splitaudit.indexer.dedup.keep import DEFAULT_POLICY, POLICIES, POLICY_HELP
from splitaudit.indexer.errors import IndexUnavailableError, UsageError
from splitaudit.indexer.workspace import Workspace

if TYPE_CHECKING:
    from splitaudit.indexer.pipeline.ray_match import Executor

TEMP_CORPUS = "dedup"


def _run(
    ws: Workspace,
    corpus: str,
    *,
    keep: str,
    semantic: bool,
    thresholds: dict[str, Any],
    progress_opts: dict[str, Any],
    by: str = "image",
    executor: Executor | None = None,
) -> int:
    from splitaudit.indexer.dedup.service import create_dedup, run_dedup

    if by == "caption":
        from splitaudit.indexer.dedup.by_caption import run_caption_dedup

        with fraction_progress(f"dedup {corpus} by caption", **progress_opts) as progress:
            return run_caption_dedup(
                ws, corpus, keep=keep, thresholds=thresholds, progress=progress
            )

    run_id = create_dedup(
        ws, corpus=corpus, keep=keep, semantic=semantic, thresholds=thresholds, resume=True
    )
    with fraction_progress(f"dedup {corpus}", **progress_opts) as progress:
        run_dedup(ws, run_id, progress=progress, executor=executor)
    return run_id


def _index_temporary(
    ws: Workspace,
    sources: Sequence[str],
    *,
    model_spec: str,
    no_embed: bool,
    workers: int | str,
    progress_opts: dict[str, Any],
    backend: str = "auto",
    home: Path | None = None,
) -> None:
    """Index folder / manifest / split sources into the temporary corpus.

    The model runs on ``backend`` as ``splitaudit index`` runs it, its exports cached in
    ``home`` (the --home folder, not the temporary workspace: the next run reuses them).
    """
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.open import open_source

    opened = [open_source(s) for s in sources]
    embedder = None
    if not no_embed:
        from splitaudit.indexer.embed.backends import load_embedder_on_backend

        embedder = load_embedder_on_backend(
            model_spec, backend=backend, cache_dir=export_cache_dir(home or Path("."))
        )
    with counting_progress("reading", **progress_opts) as done:
        index_sources(
            ws,
            TEMP_CORPUS,
            opened,
            embedder=embedder,
            workers=resolve_workers(workers),
            progress=done,
            model_spec=None if embedder is None else model_spec,
        )


def _write_outputs(
    ws: Workspace, run_id: int, outputs: dict[str, Path | None], by: str = "image"
) -> dict[str, Any]:
    from splitaudit.indexer.dedup.by_caption import caption_dedup_report
    from splitaudit.indexer.dedup.outputs import (
        dedup_report,
        drop_rows,
        write_clusters,
        write_drop_list,
    )

    with ws.sessions() as s:
        report = caption_dedup_report(s, run_id) if by == "caption" else dedup_report(s, run_id)
        for option in ("json", "csv", "parquet"):
            path = outputs[option]
            if path is not None:
                if path.suffix.lower() != f".{option}":
                    raise UsageError(f"--{option} {path}: the file name must end in .{option}")
                write_clusters(path, report)
        if outputs["drop_list"] is not None:
            write_drop_list(outputs["drop_list"], drop_rows(s, run_id))
    return report


def _summary_line(report: dict[str, Any]) -> str:
    sm = report["summary"]
    tiers = ", ".join(f"{t} {n}" for t, n in sm["by_tier"].items())
    line = (
        f"{sm['items']} items: {sm['clusters']} duplicate clusters, {sm['duplicates']} duplicates to drop "
        f"({100 * sm['duplicate_rate']:.2f}%; {tiers}); kept one per cluster by '{report['keep']}'"
    )
    if report.get("semantic"):
        line += f"; {sm.get('semantic_clusters', 0)} semantic clusters (reported only, not dropped)"
    return line


@click.command()
@click.argument("sources", nargs=-1)
@click.option(
    "--corpus", help="Indexed corpus to deduplicate (or give SOURCE... to index on the fly)."
)
@home_option
@click.option(
    "--keep",
    type=click.Choice(list(POLICIES)),
    default=DEFAULT_POLICY,
    show_default=True,
    help=f"Which member of each cluster is kept. {POLICY_HELP}.",
)
@click.option(
    "--by",
    type=click.Choice(["image", "caption"]),
    default="image",
    show_default=True,
    help="Cluster by image (hashes, embeddings, pixels) or by caption (exact and near copies of "
    "the alt-text; docs/captions.md).",
)
@click.option(
    "--semantic",
    is_flag=True,
    help="Also report semantic clusters (embedding cosine, like SemDeDup); never in the drop list.",
)
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="NAME=VALUE",
    help="Matching threshold (repeatable), as for `splitaudit audit`, e.g. phash_hamming=6.",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the clusters and summary as JSON (splitaudit.dedup/v1).",
)
@click.option(
    "--csv",
    "csv_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the clusters as CSV: one row per member.",
)
@click.option(
    "--parquet",
    "parquet_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the clusters as Parquet: one row per member.",
)
@click.option(
    "--drop-list",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the keys to drop: .txt (one per line) or .csv/.parquet with key,url columns.",
)
@click.option(
    "--model",
    "model_spec",
    default=DEFAULT_MODEL_SPEC,
    show_default=True,
    help="Embedding model for SOURCE... indexed on the fly.",
)
@click.option("--no-embed", is_flag=True, help="Index SOURCE... with hashes only (no embeddings).")
@backend_option
@workers_option
@executor_options(
    "local: this machine; ray: the self-joins cut into shards and the chunks verified on Ray "
    "actors, one per CPU of the cluster or --workers N (pip install 'splitaudit[ray]'); the "
    "same clusters either way."
)
@progress_options
@handle_errors
def dedup(
    sources: tuple[str, ...],
    corpus: str | None,
    home: Path,
    keep: str,
    by: str,
    semantic: bool,
    thresholds: tuple[str, ...],
    json_out: Path | None,
    csv_out: Path | None,
    parquet_out: Path | None,
    drop_list: Path | None,
    model_spec: str,
    no_embed: bool,
    backend: str,
    workers: int | str,
    executor: str,
    ray_address: str | None,
    quiet: bool,
    progress_interval: float,
) -> None:
    """Find exact and near duplicates within a corpus and choose one member of each cluster to keep.

    Deduplicates the indexed corpus --corpus NAME, or SOURCE... (folders, manifests, splits,
    WebDataset shards) indexed on the fly into a temporary corpus. Pairs are found and
    verified exactly as an audit finds matches (same tiers and thresholds).
    """
    from splitaudit.indexer.gate.policy import parse_threshold_options

    if bool(sources) == bool(corpus):
        raise UsageError(
            "give either --corpus NAME (an indexed corpus) or SOURCE... to index on the fly"
        )
    if by == "caption" and semantic:
        raise UsageError("--semantic clusters images by embedding; drop it with --by caption")
    if executor == "ray" and by == "caption":
        raise UsageError("--executor ray runs image dedup; caption dedup runs here (drop it)")
    th: dict[str, Any] = dict(parse_threshold_options(thresholds))
    run_on = executor_of(
        executor,
        ray_address,
        workers=resolve_workers(workers),
        # on a cluster: --workers N actors, else one per cluster CPU
        actors=None if workers == "auto" or not ray_address else int(workers),
    )
    progress_opts: dict[str, Any] = {"quiet": quiet, "interval_s": progress_interval}
    outputs = {"json": json_out, "csv": csv_out, "parquet": parquet_out, "drop_list": drop_list}
    if corpus:
        if not home.is_dir():
            raise IndexUnavailableError(
                f"no splitaudit index at {home}: build it with `splitaudit index SOURCE --corpus {corpus} "
                f"--home {home}`, or pass SOURCE... to dedup without an index"
            )
        ws = open_workspace(home)
        try:
            run_id = _run(
                ws,
                corpus,
                keep=keep,
                by=by,
                semantic=semantic,
                thresholds=th,
                progress_opts=progress_opts,
                executor=run_on,
            )
            report = _write_outputs(ws, run_id, outputs, by)
        finally:
            ws.close()
    else:
        with tempfile.TemporaryDirectory(prefix="splitaudit-dedup-") as tmp:
            ws = Workspace.open(Path(tmp))
            try:
                _index_temporary(
                    ws,
                    sources,
                    model_spec=model_spec,
                    no_embed=no_embed,
                    workers=workers,
                    progress_opts=progress_opts,
                    backend=backend,
                    home=home,
                )
                run_id = _run(
                    ws,
                    TEMP_CORPUS,
                    keep=keep,
                    by=by,
                    semantic=semantic,
                    thresholds=th,
                    progress_opts=progress_opts,
                    executor=run_on,
                )
                report = _write_outputs(ws, run_id, outputs, by)
            finally:
                ws.close()
    click.echo(_summary_line(report))
