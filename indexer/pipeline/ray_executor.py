"""The Ray executor: whole shards are read, decoded, hashed and embedded on Ray actors.

Each actor loads the embedding model once (on a GPU when ``gpus_per_worker`` > 0) and turns a
shard into prepared batches (``process_shard``); results come back through Ray's object store
(spilled to disk when large) and the driver commits each shard in one transaction that also
claims it (``commit_batches(claim=fingerprint)``): a shard is merged exactly once even if Ray
retries a task or two drivers race. Ray is imported lazily (``pip install splitaudit[ray]``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from splitaudit.indexer.pipeline.ray_cluster import ray_cluster
from splitaudit.indexer.pipeline.rows import PreparedBatch, commit_batches
from splitaudit.indexer.pipeline.shard_work import process_shard
from splitaudit.indexer.sources.record import Shard, Source
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)


class ShardWorker:
    """Ray actor body: holds the embedder, processes one shard per call."""

    def __init__(self, model_spec: str | None, batch_size: int, device: str = "cpu") -> None:
        self.batch_size = batch_size
        self.embedder = None
        if model_spec is not None:
            from splitaudit.indexer.embed.loader import load_embedder

            self.embedder = load_embedder(model_spec, device=device, batch_size=min(batch_size, 64))

    def process(
        self, shard_id: int, source: Source, shard: Shard, known: frozenset[str], dim: int | None
    ) -> tuple[int, list[PreparedBatch]]:
        """``shard_id`` and the prepared batches of its shard (see ``process_shard``)."""
        return shard_id, process_shard(
            source, shard, set(known), embedder=self.embedder, batch_size=self.batch_size, dim=dim
        )


def run_on_ray(
    ws: Workspace,
    *,
    corpus_id: int,
    corpus_dir: Path,
    tasks: Iterable[Any],
    summary: Any,
    progress: Callable[[int], None] | None,
    model_spec: str | None,
    batch_size: int,
    workers: int,
    dim: int | None,
    address: str | None = None,
    gpus_per_worker: float = 0.0,
) -> None:
    """Process ``tasks`` (``ShardTask``s) on Ray actors and commit each shard's result once."""
    todo = list(tasks)
    if not todo:
        return
    with ray_cluster(address, workers) as ray:
        from ray.util import ActorPool

        n_actors = max(1, min(workers, len(todo)))
        device = "cuda" if gpus_per_worker > 0 else "cpu"
        actor_cls = ray.remote(num_cpus=1, num_gpus=gpus_per_worker)(ShardWorker)
        actors = [actor_cls.remote(model_spec, batch_size, device) for _ in range(n_actors)]
        pool = ActorPool(actors)
        by_shard = {t.shard_id: t for t in todo}
        log.info("ray: %d shards on %d actors", len(todo), n_actors)

        def submit(actor: Any, task: Any) -> Any:
            return actor.process.remote(task.shard_id, task.source, task.shard, task.known, dim)

        # One shard per actor in flight; results are committed as shards finish, in any order.
        for shard_id, batches in pool.map_unordered(submit, todo):
            _commit_shard(ws, corpus_id, corpus_dir, by_shard[shard_id], batches, summary, progress)
        for actor in actors:
            ray.kill(actor)


def _commit_shard(
    ws: Workspace,
    corpus_id: int,
    corpus_dir: Path,
    task: Any,
    batches: list[PreparedBatch],
    summary: Any,
    progress: Callable[[int], None] | None,
) -> None:
    committed = commit_batches(
        ws,
        corpus_id=corpus_id,
        shard_id=task.shard_id,
        corpus_dir=corpus_dir,
        batches=batches,
        claim=task.shard.fingerprint,
    )
    n = sum(len(b.items) + len(b.failed) for b in batches)
    if not committed:
        log.warning("shard %s was committed by another run; its result is dropped", task.shard.name)
        summary.shards_skipped += 1
        return
    for b in batches:
        summary.record(b)
    summary.shards_done += 1
    if progress:
        progress(n)
