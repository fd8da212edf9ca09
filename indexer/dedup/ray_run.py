"""Dedup on Ray: the self-joins cut into shards on the actors, then the chunks on the same actors.

Each actor opens the workspace, the corpus index (memory-mapped where the store allows it)
and the verification store once. The driver's ``pairs.join_corpus`` runs its joins through
``sharded_join.ShardedSelfJoins``: the hash joins' query values and the vector join's cells
(or Flat blocks) are cut among the actors, each maps only its part of the vector index, and
the driver merges the answers into the tables the local join builds. The merged tables go
to Ray's object store, where every actor on a node reads the same copy; each actor wraps its
index in the same stand-in stores the driver built and runs ``pairs.chunk_edges``
(candidates, pixel and geometric verification) on the chunks it is given. The driver gets each chunk's edges back in chunk order, so ``service`` commits them
with the run's progress counter exactly as the local executor does (a killed run resumes at
the next chunk) and the edges, hence the clusters, are the local executor's.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from splitaudit.indexer.dedup.pairs import Chunk, Edge, chunk_edges
from splitaudit.indexer.dedup.sharded_join import JoinShard, ShardedSelfJoins
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.pipeline.ray_cluster import ray_cluster
from splitaudit.indexer.pipeline.ray_match import (
    BATCHES_PER_ACTOR,
    WorkspaceActor,
    WorkspaceRef,
    actor_count,
    log_actor_cpu,
)
from splitaudit.indexer.pipeline.ray_shards import process_rss
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
    """Ray actor body: the corpus index opened once; shards of the self-joins, then edges per chunk."""

    def __init__(self, ref: WorkspaceRef, corpus: str) -> None:
        from splitaudit.indexer.pipeline.index import open_corpus_index

        super().__init__(ref)
        self.base = open_corpus_index(self.ws, corpus)
        self.joins = JoinShard(self.base.hashes)
        self.index: CorpusIndex | None = None
        self.job: ChunkJob | None = None

    def join(self, method: str, *args: Any) -> Any:
        """``JoinShard.method(*args)``: this actor's piece of one self-join."""
        return getattr(self.joins, method)(*args)

    def prepare(self, tables: JoinTables, job: ChunkJob) -> int:
        """Take the run's join tables (the whole joins, merged on the driver); returns the
        actor's resident bytes after the joins."""
        self.joins.cells.clear()
        self.index = tables.attach(self.base)
        self.job = job
        self.skip, self.grouped = set(job.skip), set(job.grouped)
        return process_rss()

    def edges(self, n: int, chunk: Chunk) -> tuple[int, list[Edge]]:
        """Chunk ``n``'s duplicate pairs with the whole corpus (``pairs.chunk_edges``)."""
        assert self.index is not None and self.job is not None
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


class RayDedup:
    """A dedup's Ray actors (one per cluster CPU, or ``actors``): the self-joins' shards
    (``joins``), then the chunks' edges (``edges``). ``close`` stops them (and a Ray
    instance started here)."""

    def __init__(
        self,
        ws: Workspace,
        *,
        corpus: str,
        address: str | None = None,
        workers: int = 1,
        actors: int | None = None,
    ) -> None:
        self._cluster = ray_cluster(address, workers)
        self.ray = self._cluster.__enter__()
        self.actors: list[Any] = []
        try:
            n_actors = actor_count(self.ray, actors)
            worker_cls = self.ray.remote(num_cpus=1)(DedupWorker)
            ref = WorkspaceRef.of(ws)
            self.actors = [worker_cls.remote(ref, corpus) for _ in range(n_actors)]
            log.info("ray: dedup on %d actors", n_actors)
            self.joins = ShardedSelfJoins(self._call, n_actors, ws.corpus_dir(corpus), self._submit)
            self.rss: list[int] = []  # each actor's resident bytes after the joins
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, args: list[tuple[Any, ...]]) -> list[Any]:
        """``JoinShard.method`` on shard ``n`` (actor ``n`` mod the actors) for each args ``n``."""
        return self._submit(method, args)()

    def _submit(self, method: str, args: list[tuple[Any, ...]]) -> Callable[[], list[Any]]:
        """``_call`` without waiting: returns the function that waits for the answers. An
        array every shard gets (a batch of query vectors) goes to the object store once."""
        n_actors = len(self.actors)
        counts = Counter(id(x) for a in args for x in a if isinstance(x, np.ndarray))
        shared: dict[int, Any] = {}

        def once(x: Any) -> Any:
            if not isinstance(x, np.ndarray) or counts[id(x)] < 2:
                return x
            if id(x) not in shared:
                shared[id(x)] = self.ray.put(x)
            return shared[id(x)]

        refs = [
            self.actors[n % n_actors].join.remote(method, *(once(x) for x in a))
            for n, a in enumerate(args)
        ]
        return lambda: list(self.ray.get(refs))

    def edges(
        self, joined: CorpusIndex, chunks: Iterable[tuple[int, Chunk]], job: ChunkJob
    ) -> Generator[tuple[int, list[Edge]], None, None]:
        """``(n, chunk_edges(chunk n))`` for each numbered chunk, on the actors, in order.

        ``joined``: the driver's ``join_corpus`` index, whose tables every actor takes. At most
        ``BATCHES_PER_ACTOR`` chunks per actor are in flight: the driver reads the next
        chunks' vectors while the actors work, and memory stays bounded.
        """
        from ray.util import ActorPool

        tables, shared = self.ray.put(JoinTables.of(joined)), self.ray.put(job)
        self.rss = list(self.ray.get([a.prepare.remote(tables, shared) for a in self.actors]))
        log.info(
            "ray: dedup vector join shards mapped %s bytes; actors resident after the joins: "
            "%s MiB",
            ",".join(str(b) for b in self.joins.mapped),
            ",".join(str(r >> 20) for r in self.rss),
        )
        pool = ActorPool(list(self.actors))
        yield from _in_order(self.ray, pool, chunks, len(self.actors) * BATCHES_PER_ACTOR)

    def close(self) -> None:
        """Stop the actors (logging their CPU) and a Ray instance started for the run."""
        try:
            if self.actors:
                try:
                    log_actor_cpu(self.ray.get([a.close.remote() for a in self.actors]))
                finally:
                    for a in self.actors:
                        self.ray.kill(a)
                    self.actors = []
        finally:
            self._cluster.__exit__(None, None, None)


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
