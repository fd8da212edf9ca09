"""Index sources into a corpus: shards -> batches -> features/embeddings -> DB rows + vectors.

Resumable: each batch is one transaction (items, failed items, the vector batch row whose
file was fsynced just before, the corpus generation); a shard is marked done with its
fingerprint at the end. Re-running skips done shards whose fingerprint is unchanged and,
inside other shards, keys already stored. FAISS indexes are derived afterwards
(``sync_corpus_index``), so a SIGKILL at any point loses nothing and duplicates nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
from sqlalchemy import update

from indexer.db.engine import transaction
from indexer.db.models import Corpus, FailedItem, Item, Shard, VectorBatch
from indexer.db.queries import ensure_corpus, ensure_shard, shard_keys
from indexer.embed.protocol import Embedder
from indexer.features.hashes import Hash64
from indexer.pipeline.extract import Extracted, Extractor
from indexer.sources.record import Record, Source
from indexer.store.corpus_index import CorpusIndex, sync_corpus_index
from indexer.store.vectors import batch_path, write_batch
from indexer.workspace import Workspace

log = logging.getLogger(__name__)
MAX_FAILURE_EXAMPLES = 20

ProgressFn = Callable[[int], None]


@dataclass
class IndexSummary:
    """What an indexing run did."""

    corpus: str
    indexed: int = 0
    skipped: int = 0
    failed: int = 0
    shards_done: int = 0
    shards_skipped: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    index: dict[str, object] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        """Images processed (indexed + failed) per second."""
        return (self.indexed + self.failed) / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (for the API's index jobs)."""
        return {
            "corpus": self.corpus, "indexed": self.indexed, "skipped": self.skipped,
            "failed": self.failed, "shards_done": self.shards_done,
            "shards_skipped": self.shards_skipped, "seconds": round(self.seconds, 3),
            "throughput": round(self.throughput, 2),
            "failures": [{"key": k, "reason": r} for k, r in self.failures], "index": self.index,
        }


def index_sources(
    ws: Workspace,
    corpus_name: str,
    sources: Sequence[Source],
    *,
    embedder: Embedder | None,
    workers: int = 1,
    batch_size: int = 64,
    progress: ProgressFn | None = None,
    model_spec: str | None = None,
) -> IndexSummary:
    """Index every shard of ``sources`` into ``corpus_name``; returns the run's summary."""
    started = time.perf_counter()
    summary = IndexSummary(corpus=corpus_name)
    corpus_dir = ws.corpus_dir(corpus_name)
    with transaction(ws.sessions) as s:
        corpus = ensure_corpus(
            s, name=corpus_name,
            model_id=embedder.model_id if embedder else None,
            dim=embedder.dim if embedder else None,
            model_spec=model_spec,
        )
        corpus_id = corpus.id
    embed = embedder is not None
    with Extractor(workers=workers, keep_image=embed) as extractor:
        for source in sources:
            for shard_desc in source.shards():
                with transaction(ws.sessions) as s:
                    shard = ensure_shard(s, corpus=s.get_one(Corpus, corpus_id), source=source.uri,
                                         name=shard_desc.name)
                    if shard.status == "done" and shard.fingerprint == shard_desc.fingerprint:
                        summary.shards_skipped += 1
                        summary.skipped += shard.item_count + shard.failed_count
                        if progress:
                            progress(shard.item_count + shard.failed_count)
                        continue
                    known = shard_keys(s, shard=shard)
                    shard.status = "running"
                    shard_id = shard.id
                summary.skipped += len(known)
                if progress and known:
                    progress(len(known))
                fresh = (r for r in source.records(shard_desc) if r.key not in known)
                for extracted in extractor.map_batches(_batched(fresh, batch_size)):
                    _write_batch(ws, corpus_id, shard_id, corpus_dir, extracted, embedder, summary)
                    if progress:
                        progress(len(extracted))
                with transaction(ws.sessions) as s:
                    shard_row = s.get_one(Shard, shard_id)
                    shard_row.status = "done"
                    shard_row.fingerprint = shard_desc.fingerprint
                summary.shards_done += 1
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, corpus_id), corpus_dir)
    summary.index = index.info()
    summary.seconds = time.perf_counter() - started
    return summary


def open_corpus_index(ws: Workspace, corpus_name: str) -> CorpusIndex:
    """Load (and catch up) the FAISS stores of an existing corpus."""
    from indexer.db.queries import get_corpus

    with ws.sessions() as s:
        corpus = get_corpus(s, name=corpus_name)
        return sync_corpus_index(s, corpus, ws.corpus_dir(corpus_name))


def _batched(records: Iterator[Record], n: int) -> Iterator[list[Record]]:
    while batch := list(islice(records, n)):
        yield batch


def _write_batch(
    ws: Workspace,
    corpus_id: int,
    shard_id: int,
    corpus_dir: Path,
    extracted: list[Extracted],
    embedder: Embedder | None,
    summary: IndexSummary,
) -> None:
    """Embed the good images of a batch and commit rows + vector file in one transaction."""
    good = [e for e in extracted if e.features is not None]
    bad = [e for e in extracted if e.features is None]
    vectors = None
    if embedder is not None and good:
        images = [e.image for e in good]
        assert all(img is not None for img in images), "extractor ran without keep_image"
        vectors = embedder.embed(images)  # type: ignore[arg-type]
    with transaction(ws.sessions) as s:
        items = [_item_row(corpus_id, shard_id, e, has_embedding=vectors is not None) for e in good]
        s.add_all(items)
        for e in bad:
            s.add(FailedItem(corpus_id=corpus_id, shard_id=shard_id, key=e.record.key,
                             uri=e.record.locator.uri(), reason=e.error or "unknown error"))
        s.flush()
        if vectors is not None and items:
            name = uuid.uuid4().hex
            ids = np.fromiter((it.id for it in items), np.int64, len(items))
            write_batch(batch_path(corpus_dir, name), ids, vectors)
            s.add(VectorBatch(corpus_id=corpus_id, name=name, count=len(items)))
        s.execute(update(Corpus).where(Corpus.id == corpus_id).values(generation=Corpus.generation + 1))
        s.execute(
            update(Shard)
            .where(Shard.id == shard_id)
            .values(item_count=Shard.item_count + len(items), failed_count=Shard.failed_count + len(bad))
        )
    summary.indexed += len(good)
    summary.failed += len(bad)
    for e in bad:
        log.info("failed %s: %s", e.record.key, e.error)
        if len(summary.failures) < MAX_FAILURE_EXAMPLES:
            summary.failures.append((e.record.key, e.error or "unknown error"))


def _item_row(corpus_id: int, shard_id: int, e: Extracted, *, has_embedding: bool) -> Item:
    f, r = e.features, e.record
    assert f is not None
    return Item(
        corpus_id=corpus_id, shard_id=shard_id, key=r.key, uri=r.locator.uri(),
        locator=locator_dict(r), url=r.url, sha256=f.sha256, pixel_digest=f.pixel_digest,
        phash=Hash64(f.phash).to_signed(), dhash=Hash64(f.dhash).to_signed(),
        width=f.width, height=f.height, format=f.format, caption=r.caption, label=r.label,
        license=r.license, meta=dict(r.metadata) | ({"text_fields": f.text_fields} if f.text_fields else {}),
        has_embedding=has_embedding,
    )


def locator_dict(r: Record) -> dict[str, object]:
    """The locator as a JSON dict (None fields dropped), to read the bytes again later."""
    loc = r.locator
    out = {"kind": loc.kind, "path": loc.path, "offset": loc.offset, "size": loc.size,
           "member": loc.member, "url": loc.url}
    return {k: v for k, v in out.items() if v is not None}
