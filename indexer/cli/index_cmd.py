"""``splitaudit index``: build or extend a corpus index from sources."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from splitaudit.indexer.cli.backend_option import backend_option, export_cache_dir
from splitaudit.indexer.cli.common import (
    database_url,
    handle_errors,
    home_option,
    open_workspace,
)
from splitaudit.indexer.cli.device_option import device_option, resolve_cli_device
from splitaudit.indexer.cli.executor_option import executor_options
from splitaudit.indexer.cli.progress import counting_progress, progress_options
from splitaudit.indexer.cli.workers_option import resolve_workers, workers_option
from splitaudit.indexer.errors import ModelUnavailableError, UsageError
from splitaudit.indexer.pipeline.index import IndexSummary, index_sources
from splitaudit.indexer.pipeline.progress_log import count_folder_images
from splitaudit.indexer.sources.open import open_source
from splitaudit.indexer.sources.record import Source
from splitaudit.indexer.store.policy import STORAGES, IndexPolicy
from splitaudit.indexer.workspace import check_corpus_name

if TYPE_CHECKING:
    from splitaudit.indexer.pipeline.precomputed import DeclaredModel

# Kept here (not imported from splitaudit.indexer.embed) so `--help` never imports torch.
DEFAULT_MODEL_SPEC = "ViT-B-32:laion2b_s34b_b79k"


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--corpus", "corpus_name", required=True, help="Corpus name to create or extend.")
@home_option
@click.option(
    "--model",
    "model_spec",
    default=None,
    show_default=f"the corpus's own model; {DEFAULT_MODEL_SPEC} for a new corpus",
    help="Embedding model: open_clip NAME:TAG, NAME:/path/weights, a checkpoint folder, "
    "or efficientnet-lite0 (bundled, offline).",
)
@click.option(
    "--no-embed", is_flag=True, help="Only exact and perceptual hashes (no semantic tier)."
)
@backend_option
@click.option(
    "--precomputed-model",
    metavar="SPEC_OR_ID",
    help="For clip-retrieval folders (img_emb/ + metadata/): the model the embeddings were "
    "computed with (a --model spec, or an id). Nothing is re-embedded; --model is ignored.",
)
@click.option(
    "--shards-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="img2dataset .tar shards holding the images of a clip-retrieval folder (for hashes).",
)
@click.option(
    "--image-column",
    metavar="NAME",
    help="Hugging Face datasets (Parquet / save_to_disk / hf://): the column holding the image "
    "bytes, when its type does not tell (default: the Image struct or binary column).",
)
@click.option(
    "--key-column",
    metavar="NAME",
    help="Hugging Face datasets: the column whose values key the rows (default: a key / id "
    "column when there is one, else FILE#ROW).",
)
@workers_option
@click.option(
    "--batch-size",
    type=click.IntRange(1, 4096),
    default=None,
    help="Images per pipeline batch and DB transaction [default: per device: cpu 64, mps 128, "
    "cuda 256]; forward passes take at most 4 per CPU thread (8-64) / 64 / 256 of them.",
)
@device_option
@executor_options(
    "local: this machine; ray: shards run as Ray actors (pip install 'splitaudit[ray]').",
    "Ray cluster to join (e.g. auto); default: start a local Ray instance.",
)
@click.option(
    "--ray-gpus-per-worker",
    type=click.FloatRange(0, 64),
    default=0.0,
    show_default=True,
    help="GPUs each Ray actor reserves (embedding then runs on CUDA).",
)
@click.option(
    "--index-storage",
    type=click.Choice(list(STORAGES)),
    default="auto",
    show_default=True,
    help="Vector codes of an approximate (IVF) index: fp16, sq8 (1 byte/dim) or fp32; auto "
    "keeps the current one (fp16 for a new one).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the run summary as JSON to this file.",
)
@progress_options
@handle_errors
def index(
    sources: tuple[str, ...],
    corpus_name: str,
    home: Path,
    model_spec: str | None,
    no_embed: bool,
    backend: str,
    precomputed_model: str | None,
    shards_dir: Path | None,
    image_column: str | None,
    key_column: str | None,
    workers: int | str,
    batch_size: int | None,
    device: str,
    executor: str,
    ray_address: str | None,
    ray_gpus_per_worker: float,
    index_storage: str,
    json_out: Path | None,
    quiet: bool,
    progress_interval: float,
) -> None:
    """Index SOURCE... (folders, manifests, WebDataset shards, archives, clip-retrieval
    embedding folders, Hugging Face datasets: Parquet, save_to_disk, hf://datasets/OWNER/NAME)
    into a corpus.

    Re-running on the same sources adds nothing; new shards are added; a killed run
    resumes where it stopped.
    """
    check_corpus_name(corpus_name)
    # an existing corpus is extended with its own model, as `audit` embeds with it
    model_spec = model_spec or _corpus_model_spec(home, corpus_name) or DEFAULT_MODEL_SPEC
    opened = _open_sources(sources, shards_dir, image_column=image_column, key_column=key_column)
    policy = IndexPolicy(storage=index_storage)  # type: ignore[arg-type]
    # The device matters only where images are embedded here (not for --no-embed or Ray actors).
    embeds_here = not no_embed and executor == "local"
    resolved = resolve_cli_device(device) if embeds_here else None
    if batch_size is None:
        batch_size = resolved.pipeline_batch if resolved else 64
    declared, embedder = _models(
        opened,
        model_spec=model_spec,
        no_embed=no_embed,
        precomputed_model=precomputed_model,
        device=resolved.device if resolved else "cpu",
        batch_size=min(batch_size, resolved.embed_batch if resolved else 8),
        backend=backend,
        home=home,
    )
    # Ray actors that embed each load the model: auto starts one there, not one per CPU.
    ray_embeds = executor == "ray" and embedder is not None
    processes = 1 if ray_embeds and workers == "auto" else resolve_workers(workers)
    ws = open_workspace(home)
    try:
        with counting_progress(
            f"indexing {corpus_name}",
            quiet=quiet,
            interval_s=progress_interval,
            count_total=functools.partial(count_folder_images, opened),
        ) as done:
            summary = index_sources(
                ws,
                corpus_name,
                opened,
                embedder=embedder,
                workers=processes,
                batch_size=batch_size,
                progress=_progress(done),
                model_spec=None if embedder is None else model_spec,
                precomputed_model=declared,
                executor=executor,  # type: ignore[arg-type]
                ray_address=ray_address,
                ray_gpus_per_worker=ray_gpus_per_worker,
                policy=policy,
            )
    finally:
        ws.close()
    _print_summary(summary)
    if embedder is not None and resolved is not None:
        click.echo(
            f"embedded on {resolved.summary()}, batches of {getattr(embedder, 'batch_size', '?')}"
        )
    if json_out is not None:
        result = summary.to_dict()
        if embedder is not None and resolved is not None:
            result["device"] = resolved.device
        try:
            json_out.write_text(json.dumps(result, indent=2))
        except OSError as exc:
            raise UsageError(f"cannot write {json_out}: {exc.strerror}") from exc


def _corpus_model_spec(home: Path, corpus_name: str) -> str | None:
    """The model spec ``corpus_name`` was indexed with (None: no such corpus, or hash-only)."""
    if not home.is_dir() and not database_url():
        return None
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Corpus

    ws = open_workspace(home)
    try:
        with ws.sessions() as s:
            return s.scalar(select(Corpus.model_spec).where(Corpus.name == corpus_name))
    finally:
        ws.close()


def _open_sources(
    specs: Sequence[str],
    shards_dir: Path | None,
    *,
    image_column: str | None = None,
    key_column: str | None = None,
) -> list[Source]:
    from splitaudit.indexer.pipeline.precomputed import is_precomputed
    from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource

    opened = [open_source(s, image_column=image_column, key_column=key_column) for s in specs]
    if key_column is not None:
        from splitaudit.indexer.sources.hf_files import HFFileShards

        others = [s.uri for s in opened if not isinstance(s, HFFileShards)]
        if others:
            raise UsageError(
                f"--key-column applies to Hugging Face datasets (Parquet, save_to_disk, hf://); "
                f"{others[0]} is not one (manifests take a 'key' column)"
            )
    if shards_dir is None:
        return opened
    if not any(is_precomputed(s) for s in opened):
        raise UsageError(
            "--shards-dir applies to clip-retrieval folders (img_emb/ + metadata/) only"
        )
    return [
        PrecomputedEmbeddingSource(s.uri, shards_dir=shards_dir) if is_precomputed(s) else s
        for s in opened
    ]


def _models(
    opened: Sequence[Source],
    *,
    model_spec: str,
    no_embed: bool,
    precomputed_model: str | None,
    device: str,
    batch_size: int,
    backend: str = "auto",
    home: Path | None = None,
) -> tuple[DeclaredModel | None, Any]:
    """(declared precomputed model, embedder for image sources) for this run."""
    from splitaudit.indexer.pipeline.precomputed import declare_model, is_precomputed

    pre = [s for s in opened if is_precomputed(s)]
    images = [s for s in opened if not is_precomputed(s)]
    if precomputed_model and not pre:
        raise UsageError(
            "--precomputed-model applies to clip-retrieval folders (img_emb/ + metadata/)"
        )
    if pre and not precomputed_model:
        raise UsageError(
            f"{pre[0].uri} holds precomputed embeddings: declare the model they were computed with, "
            "e.g. --precomputed-model ViT-B-32:laion2b_s34b_b79k (nothing is re-embedded)"
        )
    _torch_threads()
    if not pre:
        if no_embed:
            return None, None
        from splitaudit.indexer.embed.backends import load_embedder_on_backend

        # Forward passes of at most the device's embed batch keep activation memory bounded.
        return None, load_embedder_on_backend(
            model_spec,
            backend=backend,
            device=device,
            batch_size=batch_size,
            cache_dir=export_cache_dir(home or Path(".")),
        )
    dims = {int(s.dim()) for s in pre}  # type: ignore[attr-defined]
    if len(dims) > 1:
        raise UsageError(
            f"the clip-retrieval folders hold embeddings of different dims {sorted(dims)}"
        )
    assert precomputed_model is not None
    declared, loaded = declare_model(precomputed_model, dims.pop())
    if images and not no_embed and loaded is None:
        raise ModelUnavailableError(
            f"image sources must be embedded with the declared model {precomputed_model}, which cannot "
            "be loaded here; index them with --no-embed or into another corpus"
        )
    return declared, (loaded if images and not no_embed else None)


def _torch_threads() -> None:
    threads = os.environ.get("SPLITAUDIT_TORCH_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def _progress(done: Callable[[int], None]) -> Callable[[int], None]:
    """The progress callback; ``SPLITAUDIT_TEST_BATCH_DELAY`` slows it down for crash tests."""
    delay = float(os.environ.get("SPLITAUDIT_TEST_BATCH_DELAY", "0") or 0)

    def update(n: int) -> None:
        done(n)
        if delay:
            time.sleep(delay)

    return update


def _print_summary(s: IndexSummary) -> None:
    click.echo(
        f"corpus {s.corpus}: indexed {s.indexed}, already present {s.skipped}, failed {s.failed} "
        f"({s.shards_done} shards processed, {s.shards_skipped} unchanged) "
        f"in {s.seconds:.1f}s ({s.throughput:.1f} img/s)"
    )
    if s.unhashed:
        click.echo(
            f"{s.unhashed} items have no image bytes: no hashes, so only the semantic tier "
            "can match them (pass --shards-dir with their tars for exact/near)"
        )
    idx = s.index
    click.echo(
        f"index: {idx.get('hash_count', 0)} hashes ({idx.get('hash_index', '')})"
        + (
            f", {idx['vector_count']} vectors ({idx['model_id']}, {idx['vector_index']})"
            if "vector_count" in idx
            else ""
        )
        + (f", {idx['shape_count']} thumbnail shapes" if idx.get("shape_count") else "")
    )
    if "recall_at_10" in idx:
        click.echo(
            f"vector index: nprobe {idx.get('nprobe')}, measured recall@10 {idx['recall_at_10']}"
        )
    if s.thresholds:
        from splitaudit.indexer.match.calibrate_thresholds import ThresholdCalibration

        click.echo(f"thresholds: {ThresholdCalibration.from_dict(s.thresholds).summary()}")
    if s.failures:
        click.echo(f"failed items (first {len(s.failures)}):")
        for key, reason in s.failures:
            click.echo(f"  {key}: {reason}")
