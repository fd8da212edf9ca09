"""Matching on Ray: an audit's query rows fanned out to actors that hold the corpus index.

The driver (``splitaudit audit --executor ray``) reads and embeds the split as the local
executor does; then actors, each holding the workspace, the corpus index (memory-mapped where
the store allows it, like any ``open_corpus_index``) and the verification store, opened once,
do the matching in two rounds:

1. the vector k-NN search, in blocks cut exactly as the local engine searches (its
   ``VECTOR_CHUNK``-row chunks, starting at multiples of the exact search's query block, and
   where a chunk takes the IVF list-by-list path every block of it takes it too) and on the
   driver's BLAS thread count: the same BLAS products, hence the same scores to the last bit
   (a product's rounding depends on how many rows it has and how they are split among
   threads). One actor in ``threads`` searches, so the cluster's CPUs are not oversubscribed;
2. the audit engine (``match.engine.match_corpus``) on small batches of rows, its vector
   search answered from round 1 (``AnsweredFloats``): hash candidates, pixel and geometric
   verification all run on the workers, spread over every actor even for a small split.

The driver concatenates the classified pairs, rows numbered as in the split. The engine
decides each query row on its own, so the result is the local executor's.

Actors need the same home folder (a shared file system on several machines) and database
(PostgreSQL via ``SPLITAUDIT_DATABASE_URL`` on several machines) as the driver: docs/ray.md.
Ray is imported lazily (``pip install 'splitaudit[ray]'``).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.match.engine import TOP_K, Pair, match_corpus
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.pipeline.ray_cluster import ray_cluster
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.exact import QUERY_BLOCK
from splitaudit.indexer.store.float_index import BATCHED_PER_LIST, FloatStore
from splitaudit.indexer.store.joined import StandInFloats
from splitaudit.indexer.workspace import Workspace

if TYPE_CHECKING:
    from splitaudit.indexer.match.verify_store import VerifyStore

log = logging.getLogger(__name__)
Answer = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.int64]]
VECTOR_CHUNK = 16_384  # the rows match.engine._vector_pairs searches together
BATCHES_PER_ACTOR = 2  # a second batch queued per actor keeps it busy while one returns
MATCH_BATCHES_PER_ACTOR = 4  # round 2: verification time varies by row; small batches even it out
MATCH_BATCH_MAX = 4096


def log_actor_cpu(closed: Sequence[tuple[int, float]]) -> None:
    """Log what the actors' processes (pid, CPU seconds) used (``bench.ray_scale`` reads it)."""
    log.info(
        "ray: %d actors used %.2f CPU-s (pids %s)",
        len(closed),
        sum(cpu for _pid, cpu in closed),
        ",".join(str(pid) for pid, _cpu in closed),
    )


def actor_count(ray: Any, wanted: int | None = None) -> int:
    """Actors to start: ``wanted``, else one per CPU of the cluster (each reserves one CPU)."""
    if wanted:
        return max(1, int(wanted))
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


@dataclass(frozen=True, slots=True)
class Executor:
    """Where matching runs: here (``local``) or on Ray actors (``ray``); the result is the same.

    ``ray_address``: the cluster to join (e.g. ``auto``; None: a local Ray instance of
    ``workers`` CPUs, started and stopped by the run); ``actors``: how many (None: one per
    cluster CPU).
    """

    kind: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    workers: int = 1
    actors: int | None = None


@dataclass(frozen=True, slots=True)
class WorkspaceRef:
    """Where an actor finds the driver's workspace: its home folder and database URL."""

    home: Path
    database_url: str

    @classmethod
    def of(cls, ws: Workspace) -> WorkspaceRef:
        """The reference to ``ws``."""
        return cls(Path(ws.home).resolve(), ws.database_url)

    def open(self) -> Workspace:
        """The workspace, opened without migrating (the driver did)."""
        return Workspace.open(self.home, self.database_url, migrate=False)


def open_verify_store_for(ws: Workspace) -> VerifyStore | None:
    """The home folder's verification store, held open by an actor (close it at the end)."""
    from splitaudit.indexer.match.verify_store import VerifyStore

    return VerifyStore.for_home(ws.home)


class WorkspaceActor:
    """What every matching actor holds: the workspace and its verification store, opened once."""

    def __init__(self, ref: WorkspaceRef) -> None:
        self.ws = ref.open()
        self.store: VerifyStore | None = open_verify_store_for(self.ws)

    def close(self) -> tuple[int, float]:
        """Write the verification store's pending features, release the workspace; returns this
        actor's process id and the CPU seconds its process has used since it started."""
        if self.store is not None:
            self.store.close()
            self.store = None
        self.ws.close()
        return os.getpid(), time.process_time()


class MatchWorker(WorkspaceActor):
    """Ray actor body: one corpus's index and the verification store, opened once; matches batches."""

    def __init__(self, ref: WorkspaceRef, corpus: str, corpus_id: int) -> None:
        from splitaudit.indexer.pipeline.index import open_corpus_index

        super().__init__(ref)
        self.corpus_id = corpus_id
        self.index: CorpusIndex = open_corpus_index(self.ws, corpus)

    def search(
        self, block: int, vectors: npt.NDArray[np.float32], k: int, threads: int | None
    ) -> tuple[int, npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Round 1: ``block`` and the top-``k`` vector search of its rows (as the engine asks
        it), on ``threads`` BLAS threads (the driver's)."""
        from threadpoolctl import threadpool_limits

        assert self.index.floats is not None
        with threadpool_limits(limits=threads, user_api="blas"):
            scores, ids = self.index.floats.search(vectors, k)
        return block, scores, ids

    def match(
        self,
        batch: int,
        state: SplitState,
        model: str | None,
        vectors: npt.NDArray[np.float32] | None,
        answers: list[Answer],
        thresholds: Thresholds,
    ) -> tuple[int, list[Pair], dict[str, float]]:
        """Round 2: ``batch``, the classified pairs of ``state``'s rows, and the phase times.

        ``model``: the corpus's model, whose vectors in ``state`` are the query vectors (else
        ``vectors``); ``answers``: round 1's searches of this batch (rows, regions).
        """
        phases = PhaseTimes()
        index = self.index
        if model is not None and model in state.vectors:
            vectors = state.vectors[model]
        if answers and index.floats is not None:
            index = replace(index, floats=AnsweredFloats(index.floats, answers))
        with self.ws.sessions() as s:
            found = match_corpus(
                s,
                corpus_id=self.corpus_id,
                index=index,
                state=state,
                vectors=vectors,
                thresholds=thresholds,
                phases=phases,
                store=self.store,
                regions=state.regions.get(model) if model is not None else None,
            )
        return batch, found.pairs, dict(phases.seconds)


class AnsweredFloats(StandInFloats):
    """A ``FloatStore`` whose ``search`` of expected query rows returns precomputed answers.

    ``answers``: ``(queries, scores, ids)`` triples (the vectors of a batch, its regions' ...);
    any other query (another ``k``, other rows) falls through to the real store.
    """

    def __init__(self, base: FloatStore, answers: Sequence[Answer]) -> None:
        super().__init__(base)
        self.answers = [(np.ascontiguousarray(q, dtype=np.float32), s, i) for q, s, i in answers]
        self.fallbacks = 0

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """The precomputed answers when ``queries`` are expected rows, else the real search."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        for expected, scores, ids in self.answers:
            if k == ids.shape[1] and q.shape == expected.shape and np.array_equal(q, expected):
                return scores, ids
        self.fallbacks += len(q)
        return self.base.search(q, k)


def batch_bounds(n: int, parts: int, index: CorpusIndex | None = None) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` covering ``n`` query rows in about ``parts`` blocks, each
    searched exactly as the local engine searches it (round 1 of the module docstring)."""
    floats = index.floats if index is not None else None
    by_list_rows = 0  # the smallest batch that takes the IVF list-by-list path (0: no IVF)
    if floats is not None and not floats.is_exact and floats.count:
        nprobe, nlist = int(floats.index.nprobe), int(floats.index.nlist)
        by_list_rows = math.ceil(BATCHED_PER_LIST * nlist / max(nprobe, 1))
    chunks = [(s, min(s + VECTOR_CHUNK, n)) for s in range(0, n, VECTOR_CHUNK)]
    per_chunk = max(1, math.ceil(parts / max(len(chunks), 1)))
    out: list[tuple[int, int]] = []
    for start, stop in chunks:
        rows = stop - start
        least = by_list_rows if by_list_rows and rows >= by_list_rows else 1
        size = max(math.ceil(rows / per_chunk), least)
        size = math.ceil(size / QUERY_BLOCK) * QUERY_BLOCK
        cuts = [*range(start, stop, size), stop]
        if least > 1 and len(cuts) > 2 and cuts[-1] - cuts[-2] < least:
            del cuts[-2]  # a short tail joins the batch before it
        out += list(itertools.pairwise(cuts))
    return out


def slice_state(
    state: SplitState, start: int, stop: int, models: Collection[str] = ()
) -> SplitState:
    """Rows ``start:stop`` of ``state`` as a state of their own (row numbers from 0), with the
    vectors (and region embeddings) of ``models`` only."""
    oriented = state.phash_oriented
    extra: dict[str, Any] = {}
    # per-model region embeddings, rows -> split rows
    extra["regions"] = {
        m: _slice_rows(r, start, stop) for m, r in state.regions.items() if m in models
    }
    return replace(
        state,
        **extra,
        ids=state.ids[start:stop],
        keys=state.keys[start:stop],
        labels=state.labels[start:stop],
        sha256=state.sha256[start:stop],
        pixel=state.pixel[start:stop],
        stream=state.stream[start:stop],
        phash=state.phash[start:stop],
        phash_mirror=state.phash_mirror[start:stop],
        min_side=state.min_side[start:stop],
        thumbs=state.thumbs[start:stop] if len(state.thumbs) == len(state) else state.thumbs,
        vectors={m: v[start:stop] for m, v in state.vectors.items() if m in models},
        images={r - start: im for r, im in state.images.items() if start <= r < stop},
        phash_oriented=None
        if oriented is None or len(oriented) != len(state)
        else oriented[start:stop],
    )


def _slice_rows(table: Any, start: int, stop: int) -> Any:
    """The entries of a ``(rows, vectors)`` table whose split row is in ``start:stop``, rows
    renumbered from 0."""
    keep = (table.rows >= start) & (table.rows < stop)
    return type(table)(table.rows[keep] - start, table.vectors[keep])


def match_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """Round 2's row ranges: ``parts`` about equal batches of at most ``MATCH_BATCH_MAX`` rows."""
    size = min(max(1, math.ceil(n / max(parts, 1))), MATCH_BATCH_MAX)
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def match_corpus_on_ray(
    ws: Workspace,
    *,
    corpus: str,
    corpus_id: int,
    index: CorpusIndex,
    state: SplitState,
    vectors: npt.NDArray[np.float32] | None,
    thresholds: Thresholds,
    address: str | None = None,
    workers: int = 1,
    actors: int | None = None,
    phases: PhaseTimes | None = None,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[Pair]:
    """``match_corpus(...).pairs`` of ``state`` against ``corpus``, computed on Ray actors.

    ``index`` is the driver's open index of the corpus (it sizes the search blocks);
    ``workers``: CPUs of a local Ray instance started here (without ``address``); ``actors``:
    how many (default: one per cluster CPU). ``on_batch(done, total)`` hears each finished
    batch of round 2. Pairs come back in batch order, rows numbered as in ``state``.
    """
    if not len(state):
        return []
    phases = phases or PhaseTimes()
    searched = vectors is not None and index.floats is not None and len(vectors) > 0
    # the model whose vectors these are: the engine finds its region embeddings by it
    model = next((m for m, v in state.vectors.items() if v is vectors), None)
    with ray_cluster(address, workers) as ray:
        from ray.util import ActorPool

        n_actors = actor_count(ray, actors)
        matches = match_bounds(len(state), n_actors * MATCH_BATCHES_PER_ACTOR)
        n_actors = min(n_actors, len(matches))
        ref = WorkspaceRef.of(ws)
        worker_cls = ray.remote(num_cpus=1)(MatchWorker)
        pool_actors = [worker_cls.remote(ref, corpus, corpus_id) for _ in range(n_actors)]
        pool = ActorPool(pool_actors)
        try:
            answers = Answers()
            if searched:
                assert vectors is not None
                threads = blas_threads()
                # each searching actor runs ``threads`` BLAS threads: as many searchers as keep
                # the cluster's CPUs busy without oversubscribing them
                searchers = pool_actors[: max(1, math.ceil(n_actors / (threads or 1)))]
                blocks = batch_bounds(len(vectors), len(searchers), index)
                with phases.phase("ray: vector search"):
                    answers.rows = _search(ActorPool(searchers), vectors, blocks, threads)
                    answers.regions = _search_regions(ray, searchers[0], state, model, threads)
            log.info(
                "ray: %d query rows in %d batches on %d actors", len(state), len(matches), n_actors
            )
            by_batch: dict[int, list[Pair]] = {}
            with phases.phase("ray: matching"):
                found = _match(ray, pool, state, model, vectors, answers, thresholds, matches)
                for done, (batch, pairs, seconds) in enumerate(found, start=1):
                    start = matches[batch][0]
                    for p in pairs:
                        p.row += start
                    by_batch[batch] = pairs
                    for name, spent in seconds.items():
                        phases.add(f"ray actors: {name}", spent)
                    if on_batch is not None:
                        on_batch(done, len(matches))
            log_actor_cpu(ray.get([a.close.remote() for a in pool_actors]))
        finally:
            for a in pool_actors:
                ray.kill(a)
    return [p for b in range(len(matches)) for p in by_batch[b]]


def blas_threads() -> int | None:
    """The BLAS threads this process runs products on (None: no BLAS library found)."""
    from threadpoolctl import threadpool_info

    counts = [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]
    return max(counts) if counts else None


def _search(
    pool: Any,
    vectors: npt.NDArray[np.float32],
    blocks: Sequence[tuple[int, int]],
    threads: int | None,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Round 1: the top-``TOP_K`` search of every row, block by block on the actors, on
    ``threads`` BLAS threads (the driver's): a product's rounding depends on how its rows are
    split among threads, and Ray starts each actor with one (``OMP_NUM_THREADS=1``)."""
    scores = np.zeros((len(vectors), TOP_K), np.float32)
    ids = np.full((len(vectors), TOP_K), -1, np.int64)

    def submit(actor: Any, block: int) -> Any:
        start, stop = blocks[block]
        part = np.ascontiguousarray(vectors[start:stop])
        return actor.search.remote(block, part, TOP_K, threads)

    for block, s, i in pool.map_unordered(submit, range(len(blocks))):
        start, stop = blocks[block]
        scores[start:stop], ids[start:stop] = s, i
    return scores, ids


@dataclass
class Answers:
    """Round 1's results: the rows' top-``TOP_K`` searches, and their regions' (if any)."""

    rows: tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]] | None = None
    # (region rows, region vectors, scores, ids) of the model's region embeddings
    regions: tuple[Any, npt.NDArray[np.float32], npt.NDArray[np.int64]] | None = None

    def batch(self, vectors: npt.NDArray[np.float32] | None, start: int, stop: int) -> list[Answer]:
        """The answers a batch of rows ``start:stop`` needs, as ``AnsweredFloats`` takes them."""
        out: list[Answer] = []
        if self.rows is not None and vectors is not None:
            scores, ids = self.rows
            out.append((vectors[start:stop], scores[start:stop], ids[start:stop]))
        if self.regions is not None:
            table, scores, ids = self.regions
            keep = (table.rows >= start) & (table.rows < stop)
            if keep.any():
                out.append((table.vectors[keep], scores[keep], ids[keep]))
        return out


def _search_regions(
    ray: Any, actor: Any, state: SplitState, model: str | None, threads: int | None
) -> tuple[Any, npt.NDArray[np.float32], npt.NDArray[np.int64]] | None:
    """Round 1 for the split's region embeddings of ``model`` (large test images): one search
    of them all, as the local engine makes it."""
    regions = state.regions.get(model) if model is not None else None
    if regions is None or not len(regions):
        return None
    from splitaudit.indexer.match import inset_candidates

    k = int(inset_candidates.REGION_TOP_K)
    queries = np.ascontiguousarray(regions.vectors, dtype=np.float32)
    _block, scores, ids = ray.get(actor.search.remote(-1, queries, k, threads))
    return regions, scores, ids


def _match(
    ray: Any,
    pool: Any,
    state: SplitState,
    model: str | None,
    vectors: npt.NDArray[np.float32] | None,
    answers: Answers,
    thresholds: Thresholds,
    bounds: Sequence[tuple[int, int]],
) -> Iterator[tuple[int, list[Pair], dict[str, float]]]:
    """Round 2: each batch's result as it finishes (any order)."""
    th = ray.put(thresholds)
    models = () if model is None else (model,)

    def submit(actor: Any, batch: int) -> Any:
        start, stop = bounds[batch]
        part = slice_state(state, start, stop, models)
        rows = None if vectors is None else np.ascontiguousarray(vectors[start:stop])
        known = answers.batch(vectors, start, stop)
        return actor.match.remote(batch, part, model, rows, known, th)

    yield from pool.map_unordered(submit, range(len(bounds)))
