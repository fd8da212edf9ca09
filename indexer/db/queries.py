"""Query functions ``(session, *, ...)``; they never commit — the caller owns the transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Corpus, FailedItem, Item, Shard
from splitaudit.indexer.errors import ModelMismatchError, NotFoundError

T = TypeVar("T")
# Values per ``IN (...)``: well under SQLite's bound-parameter limit, and short statements on PostgreSQL.
IN_CHUNK = 500


def in_chunks(values: Sequence[T], size: int = IN_CHUNK) -> Iterator[list[T]]:
    """``values`` in consecutive slices of at most ``size``, one ``column.in_(chunk)`` query each."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def get_corpus(session: Session, *, name: str) -> Corpus:
    """The corpus called ``name``; ``NotFoundError`` listing the known ones otherwise."""
    corpus = session.scalar(select(Corpus).where(Corpus.name == name))
    if corpus is None:
        known = session.scalars(select(Corpus.name).order_by(Corpus.name)).all()
        hint = f"known corpora: {', '.join(known)}" if known else "no corpus is indexed yet"
        raise NotFoundError(
            f"corpus {name!r} does not exist ({hint}); create it with `splitaudit index`"
        )
    return corpus


def ensure_corpus(
    session: Session,
    *,
    name: str,
    model_id: str | None,
    dim: int | None,
    model_spec: str | None = None,
) -> Corpus:
    """Get or create a corpus; its model is fixed by the first run that embeds into it."""
    corpus = session.scalar(select(Corpus).where(Corpus.name == name))
    if corpus is None:
        corpus = Corpus(
            name=name, model_id=model_id, model_spec=model_spec, embed_dim=dim, generation=0
        )
        session.add(corpus)
        session.flush()
        return corpus
    if model_id is not None:
        if corpus.model_id is None:
            has_items = session.scalar(
                select(func.count(Item.id)).where(Item.corpus_id == corpus.id)
            )
            if has_items:
                raise ModelMismatchError(
                    f"corpus {name!r} was indexed without embeddings (--no-embed); index it again "
                    "with --no-embed, or use a new corpus name for an embedded index"
                )
            corpus.model_id, corpus.embed_dim, corpus.model_spec = model_id, dim, model_spec
        elif corpus.model_id != model_id:
            raise ModelMismatchError(
                f"corpus {name!r} is indexed with model {corpus.model_id!r}, not {model_id!r}; "
                f"pass --model matching it, or index into a new corpus name"
            )
    return corpus


def ensure_shard(session: Session, *, corpus: Corpus, source: str, name: str) -> Shard:
    """Get or create the shard row for (corpus, source, name)."""
    shard = session.scalar(
        select(Shard).where(
            Shard.corpus_id == corpus.id, Shard.source == source, Shard.name == name
        )
    )
    if shard is None:
        shard = Shard(corpus_id=corpus.id, source=source, name=name, status="pending")
        session.add(shard)
        session.flush()
    return shard


def shard_keys(session: Session, *, shard: Shard) -> set[str]:
    """Keys already stored (indexed or failed) for a shard — bounded by the shard's size."""
    done = set(session.scalars(select(Item.key).where(Item.shard_id == shard.id)).all())
    done.update(
        session.scalars(select(FailedItem.key).where(FailedItem.shard_id == shard.id)).all()
    )
    return done


def corpus_counts(session: Session, *, corpus: Corpus) -> dict[str, int]:
    """Item, embedded, failed and shard counts of a corpus."""
    items = session.scalar(select(func.count(Item.id)).where(Item.corpus_id == corpus.id)) or 0
    embedded = (
        session.scalar(
            select(func.count(Item.id)).where(
                Item.corpus_id == corpus.id, Item.has_embedding.is_(True)
            )
        )
        or 0
    )
    failed = (
        session.scalar(select(func.count(FailedItem.id)).where(FailedItem.corpus_id == corpus.id))
        or 0
    )
    shards = session.scalar(select(func.count(Shard.id)).where(Shard.corpus_id == corpus.id)) or 0
    return {"items": items, "embedded": embedded, "failed": failed, "shards": shards}


def item_values_after(
    session: Session, corpus_id: int, column: Any, after: int, until: int, chunk: int
) -> Iterator[list[tuple[int, Any]]]:
    """``(item id, value)`` of a corpus's items above id ``after`` (up to ``until``, the
    highest id: ``max_item_id``) whose ``column`` is set, in id order, ``chunk`` rows at a
    time: what a derived index (hashes, shape descriptors) has not read yet (items are only
    ever appended)."""
    last = after
    while last < until:
        rows = session.execute(
            select(Item.id, column)
            .where(Item.corpus_id == corpus_id, Item.id > last, column.is_not(None))
            .order_by(Item.id)
            .limit(chunk)
        ).all()
        if not rows:
            return
        yield [(int(r[0]), r[1]) for r in rows]
        last = int(rows[-1][0])


def max_item_id(session: Session, corpus_id: int) -> int:
    """The highest item id of a corpus (0: none)."""
    return int(session.scalar(select(func.max(Item.id)).where(Item.corpus_id == corpus_id)) or 0)
