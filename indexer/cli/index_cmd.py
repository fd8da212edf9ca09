"""``splitaudit index``: build or extend a corpus index from sources."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import click
from tqdm import tqdm

from indexer.cli.common import handle_errors, home_option, open_workspace
from indexer.errors import UsageError
from indexer.pipeline.index import IndexSummary, index_sources
from indexer.sources.open import open_source
from indexer.workspace import check_corpus_name

# Kept here (not imported from indexer.embed) so `--help` never imports torch.
DEFAULT_MODEL_SPEC = "ViT-B-32:laion2b_s34b_b79k"


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--corpus", "corpus_name", required=True, help="Corpus name to create or extend.")
@home_option
@click.option("--model", "model_spec", default=DEFAULT_MODEL_SPEC, show_default=True,
              help="Embedding model: open_clip NAME:TAG, NAME:/path/weights, a checkpoint folder, "
                   "or efficientnet-lite0 (bundled, offline).")
@click.option("--no-embed", is_flag=True, help="Only exact and perceptual hashes (no semantic tier).")
@click.option("--workers", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Processes for reading, decoding and hashing.")
@click.option("--batch-size", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Images per embedding batch and per DB transaction.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the run summary as JSON to this file.")
@handle_errors
def index(sources: tuple[str, ...], corpus_name: str, home: Path, model_spec: str, no_embed: bool,
          workers: int, batch_size: int, json_out: Path | None) -> None:
    """Index SOURCE... (folders, manifests, WebDataset shards, archives) into a corpus.

    Re-running on the same sources adds nothing; new shards are added; a killed run
    resumes where it stopped.
    """
    check_corpus_name(corpus_name)
    opened = [open_source(s) for s in sources]
    ws = open_workspace(home)
    try:
        embedder = None
        if not no_embed:
            torch_threads = os.environ.get("SPLITAUDIT_TORCH_THREADS")
            if torch_threads:
                import torch

                torch.set_num_threads(int(torch_threads))
            from indexer.embed.loader import load_embedder

            embedder = load_embedder(model_spec, batch_size=min(batch_size, 64))
        with tqdm(unit="img", desc=f"indexing {corpus_name}", dynamic_ncols=True,
                  disable=None, mininterval=0.5) as bar:
            summary = index_sources(ws, corpus_name, opened, embedder=embedder, workers=workers,
                                    batch_size=batch_size, progress=_progress(bar),
                                    model_spec=None if no_embed else model_spec)
    finally:
        ws.close()
    _print_summary(summary)
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(summary.to_dict(), indent=2))
        except OSError as exc:
            raise UsageError(f"cannot write {json_out}: {exc.strerror}") from exc


def _progress(bar: tqdm) -> Callable[[int], None]:
    """The progress callback; ``SPLITAUDIT_TEST_BATCH_DELAY`` slows it down for crash tests."""
    delay = float(os.environ.get("SPLITAUDIT_TEST_BATCH_DELAY", "0") or 0)

    def update(n: int) -> None:
        bar.update(n)
        if delay:
            time.sleep(delay)

    return update


def _print_summary(s: IndexSummary) -> None:
    click.echo(
        f"corpus {s.corpus}: indexed {s.indexed}, already present {s.skipped}, failed {s.failed} "
        f"({s.shards_done} shards processed, {s.shards_skipped} unchanged) "
        f"in {s.seconds:.1f}s ({s.throughput:.1f} img/s)"
    )
    idx = s.index
    click.echo(f"index: {idx.get('hash_count', 0)} hashes"
               + (f", {idx['vector_count']} vectors ({idx['model_id']})" if "vector_count" in idx else ""))
    if s.failures:
        click.echo("failed items (first %d):" % len(s.failures))
        for key, reason in s.failures:
            click.echo(f"  {key}: {reason}")
