"""Dedup chunks on Ray: the self-join tables shared through the object store, chunks on actors.

The driver joins the corpus once (``pairs.join_corpus``) and puts the join tables (numpy
arrays) in Ray's object store, where every actor on a node reads the same copy. Each actor
opens the workspace, the corpus index (memory-mapped where the store allows it) and the
verification store once, wraps its index in the same stand-in stores the driver built, and
runs ``pairs.chunk_edges`` (candidates, pixel and geometric verification) on the chunks it
is given. The driver gets each chunk's edges back in chunk order, so ``service`` commits them
with the run's progress counter exactly as the local executor does (a killed run resumes at
the next chunk) and the edges, hence the clusters, are the local executor's.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from splitaudit.indexer.dedup.pairs import Chunk, Edge, chunk_edges
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.pipeline.ray_cluster import ray_cluster
from splitaudit.indexer.pipeline.ray_match import (
    BATCHES_PER_ACTOR,
    WorkspaceActor,
    WorkspaceRef,
    actor_count,
    log_actor_cpu,
)
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.joined import JoinedFloats, JoinedHashes
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)
_HASH_EXTRA = ("witness",)  # optional JoinedHashes tables, passed on where the store has them


@dataclass(frozen=True)
class JoinTables:
    """The self-join tables of a joined index: what an actor needs to rebuild its stand-ins."""

    radius: int
    within: Neighbours
    knn_k: int
    nearest: Neighbours | None
    vectors: Neighbours | None = None
    vector_k: int = 0
    vector_floor: float = 0.0
    # further tables the hash stand-in holds (e.g. the pair cosines of a second-witness rule)
    hash_extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, joined: CorpusIndex) -> JoinTables:
        """The tables inside ``joined`` (as ``join_corpus`` returns it)."""
        hashes = joined.hashes
        if not isinstance(hashes, JoinedHashes):
            raise TypeError("a dedup index's hashes are a JoinedHashes (pairs.join_corpus)")
        extra = {name: getattr(hashes, name) for name in _HASH_EXTRA if hasattr(hashes, name)}
        floats = joined.floats
        if isinstance(floats, JoinedFloats):
            return cls(
                hashes.radius,
                hashes.within,
                hashes.knn_k,
                hashes.nearest,
                floats.table,
                floats.k,
                floats.floor,
                extra,
            )
        return cls(hashes.radius, hashes.within, hashes.knn_k, hashes.nearest, hash_extra=extra)

    def attach(self, base: CorpusIndex) -> CorpusIndex:
        """``base`` (the corpus index as opened) answering from these tables."""
        hashes = JoinedHashes(
            base.hashes,
            radius=self.radius,
            within=self.within,
            knn_k=self.knn_k,
            nearest=self.nearest,
            **self.hash_extra,
        )
        floats = base.floats
        if floats is not None and self.vectors is not None:
            floats = JoinedFloats(
                floats, table=self.vectors, k=self.vector_k, floor=self.vector_floor
            )
        return CorpusIndex(
            corpus=base.corpus, generation=base.generation, hashes=hashes, floats=floats
        )


@dataclass(frozen=True)
class ChunkJob:
    """What every chunk of one run shares (sent to each actor once)."""

    corpus_id: int
    thresholds: Thresholds
    semantic: bool
    skip: frozenset[int]
    grouped: frozenset[int]


class DedupWorker(WorkspaceActor):
    """Ray actor body: the corpus index with the run's join tables, opened once; edges per chunk."""

    def __init__(self, ref: WorkspaceRef, corpus: str, tables: JoinTables, job: ChunkJob) -> None:
        from splitaudit.indexer.pipeline.index import open_corpus_index

        super().__init__(ref)
        self.job = job
        self.skip, self.grouped = set(job.skip), set(job.grouped)
        self.index = tables.attach(open_corpus_index(self.ws, corpus))

    def edges(self, n: int, chunk: Chunk) -> tuple[int, list[Edge]]:
        """Chunk ``n``'s duplicate pairs with the whole corpus (``pairs.chunk_edges``)."""
        with self.ws.sessions() as s:
            return n, chunk_edges(
                s,
                corpus_id=self.job.corpus_id,
                index=self.index,
                chunk=chunk,
                skip=self.skip,
                thresholds=self.job.thresholds,
                semantic=self.job.semantic,
                store=self.store,
                grouped=self.grouped,
            )


def edges_on_ray(
    ws: Workspace,
    *,
    corpus: str,
    joined: CorpusIndex,
    chunks: Iterable[tuple[int, Chunk]],
    job: ChunkJob,
    address: str | None = None,
    workers: int = 1,
    actors: int | None = None,
) -> Generator[tuple[int, list[Edge]], None, None]:
    """``(n, chunk_edges(chunk n))`` for each numbered chunk, computed on Ray actors, in order.

    ``joined``: the driver's ``join_corpus`` index; ``workers``: CPUs of a local Ray instance
    started here (without ``address``); ``actors``: how many (default: one per cluster CPU).
    At most ``BATCHES_PER_ACTOR`` chunks per actor are in flight: the driver reads the next
    chunks' vectors while the actors work, and memory stays bounded.
    """
    with ray_cluster(address, workers) as ray:
        from ray.util import ActorPool

        n_actors = actor_count(ray, actors)
        tables, shared = ray.put(JoinTables.of(joined)), ray.put(job)
        worker_cls = ray.remote(num_cpus=1)(DedupWorker)
        ref = WorkspaceRef.of(ws)
        pool_actors = [worker_cls.remote(ref, corpus, tables, shared) for _ in range(n_actors)]
        log.info("ray: dedup chunks on %d actors", n_actors)
        try:
            yield from _in_order(ray, ActorPool(pool_actors), chunks, n_actors * BATCHES_PER_ACTOR)
            log_actor_cpu(ray.get([a.close.remote() for a in pool_actors]))
        finally:
            for a in pool_actors:
                ray.kill(a)


def _in_order(
    ray: Any, pool: Any, chunks: Iterable[tuple[int, Chunk]], in_flight: int
) -> Iterator[tuple[int, list[Edge]]]:
    """Results in submission order, with at most ``in_flight`` chunks submitted and not yet yielded."""
    waiting: list[int] = []
    ready: dict[int, list[Edge]] = {}
    todo = iter(chunks)
    exhausted = False
    while True:
        while not exhausted and len(waiting) < in_flight:
            item = next(todo, None)
            if item is None:
                exhausted = True
                break
            n, chunk = item
            pool.submit(lambda actor, c: actor.edges.remote(*c), (n, chunk))
            waiting.append(n)
        if not waiting:
            return
        while waiting[0] not in ready:
            n, edges = pool.get_next_unordered()
            ready[n] = edges
        first = waiting.pop(0)
        yield first, ready.pop(first)
