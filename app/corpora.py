"""Read models of corpora for the API: listing, detail with counts, model, index and failed items."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Corpus, FailedItem, Shard
from splitaudit.indexer.db.queries import corpus_counts, get_corpus
from splitaudit.indexer.errors import IndexMismatchError, UsageError
from splitaudit.indexer.store import binary_index, float_index
from splitaudit.indexer.store.sidecar import Sidecar
from splitaudit.indexer.timefmt import iso
from splitaudit.indexer.workspace import Workspace

MAX_PAGE_SIZE = 500


def corpus_dict(session: Session, corpus: Corpus) -> dict[str, Any]:
    """Name, model and counts of a corpus."""
    return {
        "id": corpus.id,
        "name": corpus.name,
        "model": {"id": corpus.model_id, "spec": corpus.model_spec, "dim": corpus.embed_dim},
        "generation": corpus.generation,
        "counts": corpus_counts(session, corpus=corpus),
        "created_at": iso(corpus.created_at),
        "updated_at": iso(corpus.updated_at),
    }


def list_corpora(session: Session) -> list[dict[str, Any]]:
    """Every corpus, by name."""
    return [corpus_dict(session, c) for c in session.scalars(select(Corpus).order_by(Corpus.name))]


def _sidecar_info(folder: Path, filename: str, generation: int) -> dict[str, Any] | None:
    path = folder / filename
    if not path.exists():
        return None
    try:
        side = Sidecar.load(path)
    except IndexMismatchError as exc:
        return {"error": str(exc)}
    return {
        "count": side.count,
        "index_type": side.index_type,
        "generation": side.generation,
        "model_id": side.model_id,
        "dim": side.dim,
        "metric": side.metric,
        "up_to_date": side.generation == generation,
    }


def index_info(ws: Workspace, corpus: Corpus) -> dict[str, Any]:
    """What the saved FAISS stores hold, from their sidecars (nothing is loaded)."""
    folder = ws.corpus_dir(corpus.name)
    return {
        "hashes": _sidecar_info(folder, binary_index.SIDECAR_FILE, corpus.generation),
        "vectors": _sidecar_info(folder, float_index.SIDECAR_FILE, corpus.generation),
    }


def corpus_detail(
    ws: Workspace, session: Session, *, name: str, failed_page: int = 1, failed_page_size: int = 50
) -> dict[str, Any]:
    """A corpus with counts, model, index info, shards summary and one page of failed items."""
    if failed_page < 1 or not 1 <= failed_page_size <= MAX_PAGE_SIZE:
        raise UsageError(f"failed_page must be >= 1 and failed_page_size 1..{MAX_PAGE_SIZE}")
    corpus = get_corpus(session, name=name)
    out = corpus_dict(session, corpus)
    out["index"] = index_info(ws, corpus)
    shard_rows = session.execute(
        select(Shard.status, func.count(Shard.id))
        .where(Shard.corpus_id == corpus.id)
        .group_by(Shard.status)
    ).all()
    out["shards"] = {status: int(n) for status, n in shard_rows}
    failed = session.execute(
        select(FailedItem, Shard.name)
        .join(Shard, FailedItem.shard_id == Shard.id)
        .where(FailedItem.corpus_id == corpus.id)
        .order_by(FailedItem.id)
        .limit(failed_page_size)
        .offset((failed_page - 1) * failed_page_size)
    ).all()
    out["failed"] = {
        "items": [
            {
                "id": f.id,
                "key": f.key,
                "uri": f.uri,
                "shard": shard,
                "reason": f.reason,
                "at": iso(f.created_at),
            }
            for f, shard in failed
        ],
        "total": out["counts"]["failed"],
        "page": failed_page,
        "page_size": failed_page_size,
    }
    return out
