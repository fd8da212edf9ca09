"""Turning extracted records into DB rows + vectors (``prepare_batch``) and committing them (``commit_batches``).

Preparing is pure and picklable, so it runs wherever the records were read (a local loop, a
worker process or a Ray actor); committing happens in the process that owns the database.
A commit is one transaction: item rows, failed items, the vector batch row whose file was
fsynced just before, the shard's counters and the corpus generation. With ``claim`` it also
marks the shard done — only if no one else already did (see ``commit_batches``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import and_, insert, not_, update

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, FailedItem, Item, Shard, VectorBatch
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.features.hashes import Hash64
from splitaudit.indexer.features.types import ImageFeatures
from splitaudit.indexer.pipeline.extract import Extracted
from splitaudit.indexer.sources.member_names import escape_undecodable_tree
from splitaudit.indexer.sources.record import Record
from splitaudit.indexer.store.vectors import batch_path, write_batch
from splitaudit.indexer.workspace import Workspace


@dataclass(frozen=True)
class PreparedBatch:
    """Rows ready to insert: ``items[i]`` has vector ``vectors[i]`` (when embedded)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    vectors: npt.NDArray[np.floating] | None = None
    failed: list[dict[str, str]] = field(default_factory=list)
    unhashed: int = 0  # items stored without hashes (no image bytes)


def locator_dict(r: Record) -> dict[str, object]:
    """The record's locator as a JSON dict (``Locator.to_dict``), to read the bytes again later."""
    return r.locator.to_dict()


def item_row(
    r: Record,
    f: ImageFeatures | None,
    *,
    has_embedding: bool,
    extra_meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Column values of one item (corpus and shard ids are added at commit)."""
    meta = dict(r.metadata) | (extra_meta or {})
    row: dict[str, Any] = dict(
        key=r.key,
        uri=r.locator.uri(),
        locator=locator_dict(r),
        url=r.url,
        caption=r.caption,
        label=r.label,
        license=r.license,
        has_embedding=has_embedding,
        sha256=None,
        pixel_digest=None,
        stream_digest=None,
        phash=None,
        dhash=None,
        width=None,
        height=None,
        format=None,
        shape=None,
    )
    if f is not None:
        if f.text_fields:
            meta["text_fields"] = f.text_fields
        row.update(
            sha256=f.sha256,
            pixel_digest=f.pixel_digest,
            stream_digest=f.stream_digest,
            phash=Hash64(f.phash).to_signed(),
            dhash=Hash64(f.dhash).to_signed(),
            width=f.width,
            height=f.height,
            format=f.format,
            shape=f.shape,
        )
    row["meta"] = meta
    return escape_undecodable_tree(row)  # type: ignore[no-any-return]  # non-UTF-8 file names


def _failed(e: Extracted) -> dict[str, str]:
    return escape_undecodable_tree(  # type: ignore[no-any-return]
        {"key": e.record.key, "uri": e.record.locator.uri(), "reason": e.error or "unknown error"}
    )


def normalize_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """float32 copies of ``vectors`` with unit rows (zero rows stay zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.maximum(norms, 1e-12)).astype(np.float32)


def prepare_batch(
    extracted: Sequence[Extracted],
    *,
    embedder: Embedder | None = None,
    precomputed: npt.NDArray[np.floating] | None = None,
) -> PreparedBatch:
    """Rows of one batch: embedded images, or precomputed vectors aligned with ``extracted``.

    With ``precomputed``, every record the source did not reject becomes an item with its
    vector; hashes only where its bytes could be read and decoded (else ``bytes_error`` is
    noted in its metadata, unless it had no bytes at all). Without, undecodable images are
    failed items and the rest are embedded by ``embedder`` (if any).
    """
    if precomputed is not None:
        keep = [i for i, e in enumerate(extracted) if not e.record.error]
        items = []
        for i in keep:
            e = extracted[i]
            note = (
                {"bytes_error": e.error}
                if e.features is None and e.record.locator.kind != "none"
                else None
            )
            items.append(item_row(e.record, e.features, has_embedding=True, extra_meta=note))
        vecs = normalize_rows(precomputed[keep]) if keep else None
        if vecs is not None and precomputed.dtype == np.float16:
            vecs = vecs.astype(np.float16)
        return PreparedBatch(
            items=items,
            vectors=vecs,
            failed=[_failed(e) for e in extracted if e.record.error],
            unhashed=sum(1 for i in keep if extracted[i].features is None),
        )
    good = [e for e in extracted if e.features is not None]
    vectors = None
    if embedder is not None and good:
        vectors = _embedded(good, embedder)
    return PreparedBatch(
        items=[item_row(e.record, e.features, has_embedding=vectors is not None) for e in good],
        vectors=vectors,
        failed=[_failed(e) for e in extracted if e.features is None],
    )


def _embedded(good: Sequence[Extracted], embedder: Embedder) -> npt.NDArray[np.float32]:
    """The vectors of ``good``: those its workers embedded (``Extracted.vector``), the rest
    embedded here from their images."""
    missing = [i for i, e in enumerate(good) if e.vector is None]
    if missing:
        images = [good[i].image for i in missing]
        assert all(img is not None for img in images), "extractor ran without keep_image"
        fresh = embedder.embed(images)  # type: ignore[arg-type]
        if len(missing) == len(good):
            return fresh
    vectors = np.empty((len(good), embedder.dim), dtype=np.float32)
    done = [i for i, e in enumerate(good) if e.vector is not None]
    if done:
        vectors[done] = np.stack([good[i].vector for i in done])  # type: ignore[misc]
    if missing:
        vectors[missing] = fresh
    return vectors


def commit_batches(
    ws: Workspace,
    *,
    corpus_id: int,
    shard_id: int,
    corpus_dir: Path,
    batches: Sequence[PreparedBatch],
    claim: str | None = None,
) -> bool:
    """Insert the batches in one transaction; returns False (nothing written) if the claim is lost.

    ``claim`` (the shard's fingerprint) also marks the shard done in the same transaction,
    and only if it is not already done with that fingerprint: the conditional UPDATE takes
    the write lock (SQLite) / row lock (PostgreSQL) first, so of two committers of one shard
    exactly one proceeds and the other sees ``rowcount == 0``.
    """
    with transaction(ws.sessions) as s:
        if claim is not None:
            done_already = and_(Shard.status == "done", Shard.fingerprint == claim)
            claimed = s.execute(
                update(Shard)
                .where(Shard.id == shard_id, not_(done_already))
                .values(status="done", fingerprint=claim)
            )
            if claimed.rowcount != 1:  # type: ignore[attr-defined]
                return False
        n_items = n_failed = 0
        for batch in batches:
            ids: list[int] = []
            if batch.items:
                ids = list(
                    s.scalars(
                        insert(Item).returning(Item.id, sort_by_parameter_order=True),
                        [dict(row, corpus_id=corpus_id, shard_id=shard_id) for row in batch.items],
                    ).all()
                )
            if batch.failed:
                s.execute(
                    insert(FailedItem),
                    [dict(f, corpus_id=corpus_id, shard_id=shard_id) for f in batch.failed],
                )
            if batch.vectors is not None and ids:
                name = uuid.uuid4().hex
                write_batch(batch_path(corpus_dir, name), np.asarray(ids, np.int64), batch.vectors)
                s.add(VectorBatch(corpus_id=corpus_id, name=name, count=len(ids)))
            n_items += len(ids)
            n_failed += len(batch.failed)
        s.execute(
            update(Corpus).where(Corpus.id == corpus_id).values(generation=Corpus.generation + 1)
        )
        s.execute(
            update(Shard)
            .where(Shard.id == shard_id)
            .values(
                item_count=Shard.item_count + n_items, failed_count=Shard.failed_count + n_failed
            )
        )
    return True
