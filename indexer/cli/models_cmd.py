"""``splitaudit models``: which embedding models are available here, their thresholds, pre-fetching."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from splitaudit.indexer.cli.common import handle_errors, home_option, open_workspace
from splitaudit.indexer.errors import UsageError

BUNDLED = "efficientnet-lite0"


@click.group()
def models() -> None:
    """List cached embedding models and their thresholds, or pre-fetch weights."""


@models.command("pull")
@click.argument("spec")
@handle_errors
def pull(spec: str) -> None:
    """Download the weights of an open_clip NAME:TAG into the Hugging Face cache.

    Run it on a machine with internet access, then copy the cache folder ($HF_HOME) to
    machines without one.
    """
    import open_clip

    from splitaudit.indexer.embed.hub import cached_weights, download_weights, hub_cache_dir
    from splitaudit.indexer.embed.spec import parse_model_spec

    parsed = parse_model_spec(spec)
    if parsed.kind != "registry":
        raise UsageError(
            f"{spec!r} is not an open_clip NAME:TAG (local checkpoints and {BUNDLED} need no download)"
        )
    assert parsed.arch is not None and parsed.pretrained is not None
    cfg = open_clip.get_pretrained_cfg(parsed.arch, parsed.pretrained)
    if not cfg:
        tags = open_clip.list_pretrained_tags_by_model(parsed.arch)
        raise UsageError(
            f"open_clip has no pretrained {parsed.arch}:{parsed.pretrained}; known tags of "
            f"{parsed.arch}: {', '.join(tags) or 'none (unknown architecture)'}"
        )
    label = f"{parsed.arch}:{parsed.pretrained}"
    path = cached_weights(cfg) or download_weights(label, cfg)
    click.echo(f"{label}: {path}")
    click.echo(f"cache: {hub_cache_dir()} (copy it and set HF_HOME on machines without a hub)")


@models.command("list")
@home_option
@handle_errors
def list_models(home: Path) -> None:
    """Show the bundled model, the open_clip models in the Hugging Face cache, and the
    thresholds each model (and each corpus in --home) uses."""
    from splitaudit.indexer.embed.hub import hub_cache_dir
    from splitaudit.indexer.match.thresholds import MODEL_THRESHOLDS

    measured = MODEL_THRESHOLDS["efficientnet-lite0:imagenet"]
    click.echo("models:")
    click.echo(
        f"  {BUNDLED} (bundled, offline): thresholds measured by bench.accuracy: near "
        f"{measured.near_cosine:.2f}, semantic {measured.semantic_cosine:.2f}, candidate "
        f"{measured.candidate_cosine:.2f}"
    )
    cached = _cached_registry_models()
    for spec, path in cached:
        click.echo(f"  {spec} (cached: {path}): thresholds calibrated per corpus at index time")
    if not cached:
        click.echo(
            f"  no open_clip weights in {hub_cache_dir()} (`splitaudit models pull NAME:TAG`)"
        )
    rows = _corpus_thresholds(home)
    if rows:
        click.echo(f"corpora in {home}:")
        for name, model_id, summary in rows:
            click.echo(f"  {name} [{model_id or 'hashes only'}]: {summary}")


def _cached_registry_models() -> list[tuple[str, str]]:
    """(NAME:TAG, local weights file) for every open_clip pretrained tag cached locally."""
    import open_clip

    from splitaudit.indexer.embed.hub import cached_weights

    out = []
    for arch, tag in open_clip.list_pretrained():
        path = cached_weights(open_clip.get_pretrained_cfg(arch, tag))
        if path is not None:
            out.append((f"{arch}:{tag}", str(path)))
    return out


def _corpus_thresholds(home: Path) -> list[tuple[str, str | None, str]]:
    """(corpus, model id, thresholds summary) for the corpora of a workspace that exists."""
    from sqlalchemy import select

    from splitaudit.indexer.cli.common import database_url
    from splitaudit.indexer.db.models import Corpus
    from splitaudit.indexer.match.corpus_thresholds import load_corpus_thresholds

    if database_url() is None and not home.is_dir():
        return []
    ws = open_workspace(home)
    try:
        with ws.sessions() as s:
            corpora: list[Any] = list(
                s.execute(select(Corpus.name, Corpus.model_id).order_by(Corpus.name))
            )
    finally:
        ws.close()
    rows = []
    for name, model_id in corpora:
        record = load_corpus_thresholds(ws.corpus_dir(name), model_id)
        if model_id is None:
            summary = "no embeddings: cosine thresholds unused"
        elif record is None:
            summary = "not calibrated yet (run `splitaudit index` on it again)"
        else:
            summary = record.summary()
        rows.append((name, model_id, summary))
    return rows
