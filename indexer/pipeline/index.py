"""Index sources into a corpus: shards -> batches -> features/embeddings -> DB rows + vectors.

Resumable: each batch is one transaction (items, failed items, the vector batch row whose
file was fsynced just before, the corpus generation); a shard is marked done with its
fingerprint at the end. Re-running skips done shards whose fingerprint is unchanged and,
inside other shards, keys already stored. FAISS indexes are derived afterwards
(``sync_corpus_index``), so a SIGKILL at any point loses nothing and duplicates nothing.

Executors: ``local`` streams each shard batch by batch (decoding in a process pool);
``ray`` runs whole shards on Ray actors and commits each shard's result in one transaction
that also claims the shard (``splitaudit.indexer.pipeline.ray_executor``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from splitaudit.indexer.captions.sync import sync_caption_index
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, Shard
from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard, shard_keys
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import ModelMismatchError, UsageError
from splitaudit.indexer.match.corpus_thresholds import calibrate_corpus_thresholds
from splitaudit.indexer.pipeline.corpus_lock import corpus_index_lock
from splitaudit.indexer.pipeline.extract import Extractor, embed_input_of, worker_forward
from splitaudit.indexer.pipeline.precomputed import DeclaredModel, is_precomputed
from splitaudit.indexer.pipeline.rows import (
    PreparedBatch,
    commit_batches,
    locator_dict,
    prepare_batch,
)
from splitaudit.indexer.pipeline.shard_work import record_batches, shard_embeddings
from splitaudit.indexer.sources.record import Record, Source
from splitaudit.indexer.sources.record import Shard as ShardDesc
from splitaudit.indexer.store.corpus_index import CorpusIndex, sync_corpus_index
from splitaudit.indexer.store.policy import IndexPolicy
from splitaudit.indexer.workspace import Workspace

__all__ = ["IndexSummary", "ShardTask", "index_sources", "locator_dict", "open_corpus_index"]

log = logging.getLogger(__name__)
MAX_FAILURE_EXAMPLES = 20

ProgressFn = Callable[[int], None]
Executor = Literal["local", "ray"]


@dataclass
class IndexSummary:
    """What an indexing run did."""

    corpus: str
    indexed: int = 0
    skipped: int = 0
    failed: int = 0
    unhashed: int = 0
    shards_done: int = 0
    shards_skipped: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, str]] = field(default_factory=list)
    index: dict[str, object] = field(default_factory=dict)
    thresholds: dict[str, object] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        """Images processed (indexed + failed) per second."""
        return (self.indexed + self.failed) / self.seconds if self.seconds > 0 else 0.0

    def record(self, batch: PreparedBatch) -> None:
        """Count a committed batch."""
        self.indexed += len(batch.items)
        self.failed += len(batch.failed)
        self.unhashed += batch.unhashed
        for f in batch.failed:
            log.info("failed %s: %s", f["key"], f["reason"])
            if len(self.failures) < MAX_FAILURE_EXAMPLES:
                self.failures.append((f["key"], f["reason"]))

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (for the API's index jobs)."""
        return {
            "corpus": self.corpus,
            "indexed": self.indexed,
            "skipped": self.skipped,
            "failed": self.failed,
            "unhashed": self.unhashed,
            "shards_done": self.shards_done,
            "shards_skipped": self.shards_skipped,
            "seconds": round(self.seconds, 3),
            "throughput": round(self.throughput, 2),
            "failures": [{"key": k, "reason": r} for k, r in self.failures],
            "index": self.index,
            "thresholds": self.thresholds,
        }


@dataclass(frozen=True)
class ShardTask:
    """A shard that still has work: its source, description, DB id and the keys already stored."""

    source: Source
    shard: ShardDesc
    shard_id: int
    known: frozenset[str]


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
    precomputed_model: DeclaredModel | None = None,
    executor: Executor = "local",
    ray_address: str | None = None,
    ray_gpus_per_worker: float = 0.0,
    policy: IndexPolicy | None = None,
) -> IndexSummary:
    """Index every shard of ``sources`` into ``corpus_name``; returns the run's summary.

    Precomputed-embedding sources need ``precomputed_model`` (the model their vectors came
    from); image sources are embedded by ``embedder`` (which must then be that same model).
    One run per corpus at a time: a second one is refused with ``CorpusBusyError`` naming
    the first (``corpus_lock``).
    """
    with corpus_index_lock(ws, corpus_name):
        return _index_sources_locked(
            ws,
            corpus_name,
            sources,
            embedder=embedder,
            workers=workers,
            batch_size=batch_size,
            progress=progress,
            model_spec=model_spec,
            precomputed_model=precomputed_model,
            executor=executor,
            ray_address=ray_address,
            ray_gpus_per_worker=ray_gpus_per_worker,
            policy=policy,
        )


def _index_sources_locked(
    ws: Workspace,
    corpus_name: str,
    sources: Sequence[Source],
    *,
    embedder: Embedder | None,
    workers: int,
    batch_size: int,
    progress: ProgressFn | None,
    model_spec: str | None,
    precomputed_model: DeclaredModel | None,
    executor: Executor,
    ray_address: str | None,
    ray_gpus_per_worker: float,
    policy: IndexPolicy | None,
) -> IndexSummary:
    started = time.perf_counter()
    summary = IndexSummary(corpus=corpus_name)
    corpus_dir = ws.corpus_dir(corpus_name)
    model_id, dim, spec = _corpus_model(sources, embedder, precomputed_model, model_spec)
    with transaction(ws.sessions) as s:
        corpus = ensure_corpus(s, name=corpus_name, model_id=model_id, dim=dim, model_spec=spec)
        corpus_id = corpus.id
        dim = corpus.embed_dim
    tasks = _pending_shards(ws, corpus_id, sources, summary, progress)
    if executor == "ray":
        from splitaudit.indexer.pipeline.ray_executor import run_on_ray

        run_on_ray(
            ws,
            corpus_id=corpus_id,
            corpus_dir=corpus_dir,
            tasks=tasks,
            summary=summary,
            progress=progress,
            model_spec=spec if embedder is not None else None,
            batch_size=batch_size,
            workers=workers,
            dim=dim,
            address=ray_address,
            gpus_per_worker=ray_gpus_per_worker,
        )
    elif executor == "local":
        _run_local(
            ws,
            corpus_id,
            corpus_dir,
            tasks,
            embedder=embedder,
            workers=workers,
            batch_size=batch_size,
            dim=dim,
            summary=summary,
            progress=progress,
        )
    else:
        raise UsageError(f"unknown executor {executor!r}: use local or ray")
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, corpus_id), corpus_dir, policy)
        calibration = calibrate_corpus_thresholds(
            s, s.get_one(Corpus, corpus_id), corpus_dir, embedder
        )
    sync_caption_index(ws, corpus_name)  # captions: the caption tier's text index
    summary.index = index.info()
    summary.thresholds = calibration.to_dict() if calibration else {}
    summary.seconds = time.perf_counter() - started
    return summary


def _corpus_model(
    sources: Sequence[Source],
    embedder: Embedder | None,
    declared: DeclaredModel | None,
    spec: str | None,
) -> tuple[str | None, int | None, str | None]:
    """(model id, dim, spec) the corpus records; checks embedder and declaration agree."""
    if any(is_precomputed(src) for src in sources) and declared is None:
        raise UsageError(
            "precomputed embeddings need the model they were computed with: pass "
            "--precomputed-model SPEC_OR_ID (e.g. ViT-B-32:laion2b_s34b_b79k)"
        )
    if declared is None:
        return (embedder.model_id, embedder.dim, spec) if embedder else (None, None, None)
    if embedder is not None and (embedder.model_id, embedder.dim) != (
        declared.model_id,
        declared.dim,
    ):
        raise ModelMismatchError(
            f"image sources would be embedded with {embedder.model_id} (dim {embedder.dim}) but the "
            f"precomputed embeddings come from {declared.model_id} (dim {declared.dim}); index "
            "them into separate corpora or embed with the declared model"
        )
    return declared.model_id, declared.dim, declared.spec or spec


def _pending_shards(
    ws: Workspace,
    corpus_id: int,
    sources: Sequence[Source],
    summary: IndexSummary,
    progress: ProgressFn | None,
) -> Iterator[ShardTask]:
    """Shards with work left (lazily, so the local executor starts before all shards are listed)."""
    for source in sources:
        for desc in source.shards():
            with transaction(ws.sessions) as s:
                shard = ensure_shard(
                    s, corpus=s.get_one(Corpus, corpus_id), source=source.uri, name=desc.name
                )
                if shard.status == "done" and shard.fingerprint == desc.fingerprint:
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
            yield ShardTask(source=source, shard=desc, shard_id=shard_id, known=frozenset(known))


def _run_local(
    ws: Workspace,
    corpus_id: int,
    corpus_dir: Path,
    tasks: Iterator[ShardTask],
    *,
    embedder: Embedder | None,
    workers: int,
    batch_size: int,
    dim: int | None,
    summary: IndexSummary,
    progress: ProgressFn | None,
) -> None:
    """Stream each shard batch by batch: decode in the pool, embed (in the pool's workers for a
    small exported model, ``worker_forward``, else here), commit each batch."""
    with Extractor(
        workers=workers,
        keep_image=embedder is not None,
        embed_input=embed_input_of(embedder),
        forward=worker_forward(embedder, workers),
    ) as extractor:
        for task in tasks:
            emb = shard_embeddings(task.source, task.shard, dim)
            rows_in_flight: deque[list[int]] = deque()
            batches = record_batches(task.source, task.shard, set(task.known), batch_size)
            for extracted in extractor.map_batches(_tracked(batches, rows_in_flight)):
                rows = rows_in_flight.popleft()
                if emb is not None:
                    prepared = prepare_batch(extracted, precomputed=emb[rows])
                else:
                    prepared = prepare_batch(extracted, embedder=embedder)
                commit_batches(
                    ws,
                    corpus_id=corpus_id,
                    shard_id=task.shard_id,
                    corpus_dir=corpus_dir,
                    batches=[prepared],
                )
                summary.record(prepared)
                if progress:
                    progress(len(extracted))
            with transaction(ws.sessions) as s:
                shard_row = s.get_one(Shard, task.shard_id)
                shard_row.status = "done"
                shard_row.fingerprint = task.shard.fingerprint
            summary.shards_done += 1


def _tracked(
    batches: Iterator[tuple[list[int], list[Record]]], rows_in_flight: deque[list[int]]
) -> Iterator[list[Record]]:
    """The record batches, remembering their row numbers (the extractor prefetches one ahead)."""
    for rows, records in batches:
        rows_in_flight.append(rows)
        yield records


def open_corpus_index(
    ws: Workspace, corpus_name: str, policy: IndexPolicy | None = None
) -> CorpusIndex:
    """Load (and catch up) the FAISS stores of an existing corpus."""
    from splitaudit.indexer.db.queries import get_corpus

    with ws.sessions() as s:
        corpus = get_corpus(s, name=corpus_name)
        return sync_corpus_index(s, corpus, ws.corpus_dir(corpus_name), policy)
