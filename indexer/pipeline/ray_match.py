"""Matching on Ray: an audit's query rows matched by actors that each hold a shard of the index.

The driver (``splitaudit audit --executor ray``) reads and embeds the split as the local
executor does, and cuts the corpus's float index into one shard per actor
(``ray_shards.plan_shards``: a Flat index by 16,384-row database blocks, an IVF index by
ranges of inverted lists). Each actor maps only its shard's bytes and holds the workspace, the
corpus's hash index and the verification store, opened once. The matching runs in two rounds:

1. the vector k-NN search, in the local engine's own query chunks (Flat: 4,096-row blocks of
   them), each fanned out to every shard and merged on the driver into the global top-k
   (``ray_shard_search.ShardedSearch``): the same BLAS products on the same thread counts
   and the local search's merges replayed, hence the same scores to the last bit and the same
   ids, ties included;
2. the audit engine (``match.engine.match_corpus``) on small batches of rows, its vector
   search answered from round 1 (``AnsweredFloats``): hash candidates, pixel and geometric
   verification all run on the workers, spread over every actor even for a small split; the
   stored vector of a hash-only candidate (its cosine) is read from the shard holding it
   (actors serve each other in a concurrency group of their own, ``PEER_GROUP``).

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import ModelUnavailableError
from splitaudit.indexer.match.engine import TOP_K, Pair, match_corpus
from splitaudit.indexer.match.pair_search import search_k, small_rows
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.pipeline.ray_cluster import ray_cluster
from splitaudit.indexer.pipeline.ray_hash_shards import (
    HASH_SHARD_MIN,
    HashShard,
    HashSpec,
    ShardedHashes,
    plan_hash_shards,
)
from splitaudit.indexer.pipeline.ray_shard_search import ShardedSearch
from splitaudit.indexer.pipeline.ray_shards import (
    FloatShard,
    ListPart,
    Part,
    ShardSpec,
    plan_shards,
    process_rss,
)
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.exact import QUERY_BLOCK
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.joined import StandInFloats
from splitaudit.indexer.store.shape_index import load_shapes
from splitaudit.indexer.workspace import Workspace

if TYPE_CHECKING:
    from PIL import Image

    from splitaudit.indexer.match.verify_store import VerifyStore

log = logging.getLogger(__name__)
Answer = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.int64]]
VECTOR_CHUNK = 16_384  # the rows match.pair_search.vector_pairs searches together
BATCHES_PER_ACTOR = 2  # dedup: a second chunk queued per actor keeps it busy while one returns
MATCH_BATCHES_PER_ACTOR = 4  # round 2: verification time varies by row; small batches even it out
MATCH_BATCH_MAX = 4096
PEER_GROUP = "peer"  # the concurrency group of calls between actors
SEARCH_BLOCK = 4096  # round 1's query rows per Flat search (a multiple of QUERY_BLOCK)


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
        self.open_workspace(ref)

    def open_workspace(self, ref: WorkspaceRef) -> None:
        """Open the workspace and verification store (SQLite: used on this thread only)."""
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
    """Ray actor body: one shard of a corpus's float index (``ray_shards.FloatShard``, only its
    own bytes mapped), the corpus's hash index and the verification store, opened once.

    Round 1 answers its pieces of each vector search (``ray_shard_search``); round 2 matches
    batches of rows, its vector search answered from round 1 and the stored vectors of
    hash-only candidates (their cosines) read from the shard that holds them.
    """

    def __init__(
        self,
        ref: WorkspaceRef,
        layout: IndexLayout,
        spec: ShardSpec | None,
        hash_spec: HashSpec | None = None,
    ) -> None:
        # the workspace is opened by ``set_peers``: on the thread every call but the peers'
        # (``reconstruct``, ``hash_search``: a concurrency group of their own, ``PEER_GROUP``)
        self.ref = ref
        self.layout = layout
        self.shard = FloatShard(spec) if spec is not None else None
        self.hash_shard = HashShard(hash_spec) if hash_spec is not None else None
        self.hashes: BinaryStore | None = (
            BinaryStore.load(layout.folder) if hash_spec is None else None
        )
        # the thumbnails' shape descriptors, whole on every actor (256 bytes a thumbnail),
        # as the driver synced them
        self.shapes = load_shapes(layout.folder)
        self.peers: list[Any] = []
        self.hash_peers: list[Any] = []
        self._embedder: Embedder | None = None  # the corpus model, for content regions

    def set_peers(self, peers: list[Any], hash_peers: list[Any] | None = None) -> int:
        """Open the workspace; note the actors holding the vector shards and the hash shards,
        in shard order (for what this actor does not hold); returns the bytes of the float
        index this actor maps."""
        self.open_workspace(self.ref)
        self.peers = peers
        self.hash_peers = hash_peers or []
        return self.mapped_bytes()

    def hash_search(self, method: str, *args: Any) -> Any:
        """``HashShard.search_radius`` or ``search_knn_within`` of this actor's hash shard."""
        assert self.hash_shard is not None and method in ("search_radius", "search_knn_within")
        return getattr(self.hash_shard, method)(*args)

    def _ask_hash_shards(self, method: str, *args: Any) -> list[Any]:
        """Every hash shard's answer, in shard order (this actor's own answered here)."""
        import ray

        assert self.hash_shard is not None
        own = self.hash_shard.spec.shard
        asked = {
            n: p.hash_search.options(concurrency_group=PEER_GROUP).remote(method, *args)
            for n, p in enumerate(self.hash_peers)
            if n != own
        }
        mine = self.hash_search(method, *args)
        got = dict(zip(asked, ray.get(list(asked.values())), strict=True))
        return [mine if n == own else got[n] for n in range(len(self.hash_peers))]

    def _hash_store(self) -> BinaryStore:
        """The whole hash index, or its shards behind one stand-in."""
        if self.hash_shard is None:
            assert self.hashes is not None
            return self.hashes
        spec = self.hash_shard.spec
        return ShardedHashes(spec.total, spec.params, self._ask_hash_shards)

    def _content_embed(self, images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
        """The corpus model's embeddings of ``images``: the content regions of pairs refused as
        an overlay (``match.content_region``), as the local audit embeds them with the driver's
        embedder. The model is loaded here on first use (most batches never need it)."""
        if self._embedder is None:
            from splitaudit.indexer.db.models import Corpus
            from splitaudit.indexer.embed.loader import load_embedder

            with self.ws.sessions() as s:
                spec = s.get(Corpus, self.layout.corpus_id).model_spec  # type: ignore[union-attr]
            if not spec:
                raise ModelUnavailableError(
                    f"corpus {self.layout.corpus!r} does not record how to load its model"
                )
            self._embedder = load_embedder(spec)
        return self._embedder.embed(images)

    def mapped_bytes(self) -> int:
        """Bytes of the float index file this actor maps (its shard only)."""
        return self.shard.mapped_bytes() if self.shard is not None else 0

    def memory(self) -> tuple[int, int]:
        """Bytes of the float index this actor maps, and its process's resident set now."""
        return self.mapped_bytes(), process_rss()

    def flat_parts(self, *args: Any) -> list[Part]:
        """``FloatShard.flat_parts``."""
        assert self.shard is not None
        return self.shard.flat_parts(*args)

    def list_parts(self, *args: Any) -> list[ListPart]:
        """``FloatShard.list_parts``."""
        assert self.shard is not None
        return self.shard.list_parts(*args)

    def faiss_search(self, *args: Any) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """``FloatShard.faiss_search``."""
        assert self.shard is not None
        return self.shard.faiss_search(*args)

    def reconstruct(self, ids: npt.NDArray[np.int64]) -> dict[int, npt.NDArray[np.float32]]:
        """``FloatShard.reconstruct``: the vectors of the ``ids`` this shard holds."""
        return self.shard.reconstruct(ids) if self.shard is not None else {}

    def _vector(self, item_id: int) -> npt.NDArray[np.float32]:
        """The stored vector of ``item_id``, from this shard or the one holding it."""
        import ray

        ask = np.array([item_id], np.int64)
        found = self.reconstruct(ask)
        if item_id not in found:
            own = self.shard.spec.shard if self.shard is not None else -1
            asked = [
                p.reconstruct.options(concurrency_group=PEER_GROUP).remote(ask)
                for n, p in enumerate(self.peers)
                if n != own
            ]
            for got in ray.get(asked):
                found.update(got)
        if item_id not in found:
            raise RuntimeError(f"item {item_id} is in no shard of the vector index")
        return found[item_id]

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
        if model is not None and model in state.vectors:
            vectors = state.vectors[model]
        floats = (
            AnsweredFloats(ShardedFloats(self.layout, self._vector), answers)
            if self.layout.has_floats
            else None
        )
        index = CorpusIndex(
            self.layout.corpus, self.layout.generation, self._hash_store(), floats, self.shapes
        )
        with self.ws.sessions() as s:
            found = match_corpus(
                s,
                corpus_id=self.layout.corpus_id,
                index=index,
                state=state,
                vectors=vectors,
                thresholds=thresholds,
                phases=phases,
                store=self.store,
                regions=state.regions.get(model) if model is not None else None,
                content_embed=self._content_embed if model is not None else None,
            )
        return batch, found.pairs, dict(phases.seconds)


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """What an actor needs to know of the corpus index besides its shard."""

    corpus: str
    corpus_id: int
    generation: int
    folder: Path
    has_floats: bool = False
    model_id: str = ""
    dim: int = 0
    count: int = 0
    index_type: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, index: CorpusIndex, corpus_id: int, folder: Path) -> IndexLayout:
        """The layout of the driver's open ``index`` saved in ``folder``."""
        f = index.floats
        if f is None:
            return cls(index.corpus, corpus_id, index.generation, folder)
        return cls(
            index.corpus,
            corpus_id,
            index.generation,
            folder,
            True,
            f.model_id,
            f.dim,
            f.count,
            f.index_type,
            dict(f.params),
        )


class _RoutedIndex:
    """The part of a FAISS index the audit engine touches besides search: ``ntotal`` and
    ``reconstruct(id)``, answered by the shards."""

    def __init__(self, count: int, vector: Callable[[int], npt.NDArray[np.float32]]) -> None:
        self.ntotal = count
        self.vector = vector

    def reconstruct(self, item_id: int) -> npt.NDArray[np.float32]:
        return self.vector(int(item_id))


class ShardedFloats(FloatStore):
    """A ``FloatStore`` whose vectors live in the shards: ``index.reconstruct`` reads the shard
    holding the item; a search the driver did not answer in round 1 is an error."""

    def __init__(
        self, layout: IndexLayout, vector: Callable[[int], npt.NDArray[np.float32]]
    ) -> None:
        super().__init__(
            _RoutedIndex(layout.count, vector),
            model_id=layout.model_id,
            dim=layout.dim,
            index_type=layout.index_type,
            params=layout.params,
        )

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Nothing for an empty index; any other search is the driver's (an error here)."""
        if self.count == 0 or len(queries) == 0:
            return np.zeros((len(queries), k), np.float32), np.full((len(queries), k), -1, np.int64)
        raise RuntimeError(
            f"a vector search of {len(queries)} rows (k={k}) that round 1 did not answer: "
            "the sharded index is searched from the driver only"
        )


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
        """The precomputed answers when ``queries`` are expected rows, else the real search
        (answers of a larger ``k`` cut to ``k``: a batch without small test images asks
        ``TOP_K`` of a split searched at ``SMALL_TOP_K``)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        for expected, scores, ids in self.answers:
            if k <= ids.shape[1] and q.shape == expected.shape and np.array_equal(q, expected):
                return scores[:, :k], ids[:, :k]
        self.fallbacks += len(q)
        return self.base.search(q, k)


def batch_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` covering ``n`` query rows in about ``parts`` blocks, each
    within one of the engine's ``VECTOR_CHUNK``-row searches and starting at a multiple of the
    exact search's query block (a Flat search's products are then the engine's own)."""
    chunks = [(s, min(s + VECTOR_CHUNK, n)) for s in range(0, n, VECTOR_CHUNK)]
    per_chunk = max(1, math.ceil(parts / max(len(chunks), 1)))
    out: list[tuple[int, int]] = []
    for start, stop in chunks:
        size = math.ceil(math.ceil((stop - start) / per_chunk) / QUERY_BLOCK) * QUERY_BLOCK
        out += list(itertools.pairwise([*range(start, stop, size), stop]))
    return out


def search_blocks(n: int, index: CorpusIndex) -> list[tuple[int, int]]:
    """Round 1's blocks of ``n`` query rows: an IVF index is searched in the engine's chunks
    themselves (its coarse step and list products depend on the batch), a Flat one in
    ``SEARCH_BLOCK``-row blocks of them (so the driver merges one while the shards search the
    next)."""
    floats = index.floats
    if floats is not None and not floats.is_exact:
        return [(s, min(s + VECTOR_CHUNK, n)) for s in range(0, n, VECTOR_CHUNK)]
    return batch_bounds(n, math.ceil(n / SEARCH_BLOCK))


def slice_state(
    state: SplitState, start: int, stop: int, models: Collection[str] = ()
) -> SplitState:
    """Rows ``start:stop`` of ``state`` as a state of their own (row numbers from 0), with the
    vectors (and region embeddings) of ``models`` only."""
    oriented = state.phash_oriented
    extra: dict[str, Any] = {}
    # per-model region embeddings, rows -> split rows
    extra["regions"] = {m: r.rows_in(start, stop) for m, r in state.regions.items() if m in models}
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
    hash_shard_min: int = HASH_SHARD_MIN,
) -> list[Pair]:
    """``match_corpus(...).pairs`` of ``state`` against ``corpus``, computed on Ray actors.

    ``index`` is the driver's open (and saved) index of the corpus: its float index is cut
    into one shard per actor (``ray_shards``), searched on the actors and merged here;
    ``workers``: CPUs of a local Ray instance started here (without ``address``); ``actors``:
    how many (default: one per cluster CPU). ``on_batch(done, total)`` hears each finished
    batch of round 2; a hash index of ``hash_shard_min`` hashes or more (with multi-index
    tables) is sharded too (``ray_hash_shards``). Pairs come back in batch order, rows
    numbered as in ``state``.
    """
    if not len(state):
        return []
    phases = phases or PhaseTimes()
    searched = vectors is not None and index.floats is not None and len(vectors) > 0
    # the model whose vectors these are: the engine finds its region embeddings by it
    model = next((m for m, v in state.vectors.items() if v is vectors), None)
    folder = ws.corpus_dir(corpus)
    with ray_cluster(address, workers) as ray:
        from ray.util import ActorPool

        n_actors = actor_count(ray, actors)
        matches = match_bounds(len(state), n_actors * MATCH_BATCHES_PER_ACTOR)
        n_actors = min(n_actors, len(matches))
        specs = (
            plan_shards(index.floats, folder, n_actors)
            if index.floats is not None and index.floats.count
            else []
        )
        hash_specs = plan_hash_shards(index.hashes, folder, n_actors, hash_shard_min)
        layout = IndexLayout.of(index, corpus_id, folder)
        ref = WorkspaceRef.of(ws)
        # other actors' requests for stored vectors are served while a batch is matched
        worker_cls = ray.remote(num_cpus=1, concurrency_groups={PEER_GROUP: 2})(MatchWorker)
        pool_actors = [
            worker_cls.remote(
                ref,
                layout,
                specs[n] if n < len(specs) else None,
                hash_specs[n] if n < len(hash_specs) else None,
            )
            for n in range(n_actors)
        ]
        holders = pool_actors[: len(specs)]
        try:
            mapped = ray.get(
                [a.set_peers.remote(holders, pool_actors[: len(hash_specs)]) for a in pool_actors]
            )
            log.info(
                "ray: hash index (%d hashes) in %d shards",
                index.hashes.count,
                max(len(hash_specs), 1),
            )
            log.info(
                "ray: float index (%s) in %d shards; bytes mapped per actor: %s",
                index.floats.index_type if index.floats is not None else "none",
                len(specs),
                ",".join(str(b) for b in mapped),
            )
            answers = Answers()
            if searched and specs:
                assert vectors is not None and index.floats is not None
                searcher = ShardedSearch(
                    index.floats,
                    specs,
                    submit=lambda n, method, *args: getattr(holders[n], method).remote(*args),
                    gather=ray.get,
                )
                with phases.phase("ray: vector search"):
                    k = search_k(small_rows(state, thresholds))
                    blocks = search_blocks(len(vectors), index)
                    answers.rows = _search(searcher, vectors, blocks, k)
                    answers.regions = _search_regions(searcher, state, model)
                if searcher.researched:
                    log.info("ray: %d tied rows searched again here", searcher.researched)
            log.info(
                "ray: %d query rows in %d batches on %d actors", len(state), len(matches), n_actors
            )
            by_batch: dict[int, list[Pair]] = {}
            with phases.phase("ray: matching"):
                pool = ActorPool(pool_actors)
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
            memory = ray.get([a.memory.remote() for a in pool_actors])
            log.info(
                "ray: actors' resident memory at the end: %s MiB",
                ",".join(f"{rss / 2**20:.0f}" for _mapped, rss in memory),
            )
            log_actor_cpu(ray.get([a.close.remote() for a in pool_actors]))
        finally:
            for a in pool_actors:
                ray.kill(a)
    return [p for b in range(len(matches)) for p in by_batch[b]]


def _search(
    searcher: ShardedSearch,
    vectors: npt.NDArray[np.float32],
    blocks: Sequence[tuple[int, int]],
    k: int = TOP_K,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Round 1: the top-``k`` search of every row (``pair_search.search_k``: more where the
    split has small test images), block by block, each block fanned out to every shard; the
    next block is sent before the last one is merged."""
    scores = np.zeros((len(vectors), k), np.float32)
    ids = np.full((len(vectors), k), -1, np.int64)
    pending: list[tuple[int, int, Callable[[], tuple[Any, Any]]]] = []
    for start, stop in [*blocks, (-1, -1)]:
        if start >= 0:
            pending.append((start, stop, searcher.begin(vectors[start:stop], k)))
        if len(pending) > 1 or (start < 0 and pending):
            a, b, finish = pending.pop(0)
            scores[a:b], ids[a:b] = finish()
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
    searcher: ShardedSearch, state: SplitState, model: str | None
) -> tuple[Any, npt.NDArray[np.float32], npt.NDArray[np.int64]] | None:
    """Round 1 for the split's region embeddings of ``model`` (large test images): one search
    of them all, as the local engine makes it."""
    regions = state.regions.get(model) if model is not None else None
    if regions is None or not len(regions):
        return None
    from splitaudit.indexer.match import inset_candidates

    k = int(inset_candidates.REGION_TOP_K)
    scores, ids = searcher.search(np.ascontiguousarray(regions.vectors, dtype=np.float32), k)
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
