"""Dedup entry points shared by the CLI, the API and the job worker: create a run, run it (resumable).

A run finds duplicate pairs chunk by chunk (``pairs``) and commits each chunk's pairs with
its progress counter, so a killed run resumes at the next chunk; then it groups the pairs
(reviewed verdicts applied), picks the kept members and stores the clusters. Memory holds the
duplicate pairs and cluster members only: never an N x N matrix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import ExitStack, closing
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from splitaudit.indexer import __version__
from splitaudit.indexer.db.by_id import rows_by_id
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, DedupEdge, DedupMember, DedupRun, Item
from splitaudit.indexer.db.queries import get_corpus
from splitaudit.indexer.dedup.candidates import candidate_items, keep_candidates
from splitaudit.indexer.dedup.clusters import Cluster, apply_reviews, build_clusters, summarize
from splitaudit.indexer.dedup.db_rows import fetch_tuples, insert_rows
from splitaudit.indexer.dedup.join_items import read_join_items
from splitaudit.indexer.dedup.keep import DEFAULT_POLICY, MemberInfo, check_policy, stored_bytes
from splitaudit.indexer.dedup.pairs import (
    CHUNK_ROWS,
    Chunk,
    Edge,
    chunk_edges,
    exact_groups,
    iter_item_chunks,
    join_corpus,
    merge_edges,
    vector_batches,
)
from splitaudit.indexer.dedup.phase_clock import PhaseClock, timed_iter
from splitaudit.indexer.dedup.ray_run import ChunkJob
from splitaudit.indexer.dedup.reviews import pair_verdicts
from splitaudit.indexer.errors import NotFoundError
from splitaudit.indexer.jobs.queue import enqueue
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.match.thresholds import Thresholds, thresholds_for_model
from splitaudit.indexer.match.verify_store import open_verify_store
from splitaudit.indexer.pipeline.index import open_corpus_index
from splitaudit.indexer.pipeline.ray_match import Executor
from splitaudit.indexer.store.calibrate import iter_chunks
from splitaudit.indexer.workspace import Workspace

if TYPE_CHECKING:
    from splitaudit.indexer.match.verify_store import VerifyStore
    from splitaudit.indexer.store.corpus_index import CorpusIndex

log = logging.getLogger(__name__)
ProgressFn = Callable[[float, str], None]


def create_dedup(
    ws: Workspace,
    *,
    corpus: str,
    keep: str = DEFAULT_POLICY,
    semantic: bool = False,
    thresholds: Mapping[str, Any] | None = None,
    as_job: bool = False,
    resume: bool = False,
) -> int:
    """Register a dedup run of ``corpus`` (queued as a job when ``as_job``); returns its id.

    ``resume``: return instead the newest unfinished local run (no job) of the corpus with the
    same parameters, so running the same command again continues where a killed one stopped.
    """
    check_policy(keep)
    with transaction(ws.sessions) as s:
        row = get_corpus(s, name=corpus)
        th = Thresholds.from_mapping(
            dict(thresholds or {}), base=thresholds_for_model(row.model_id)
        )
        params = {"keep": keep, "semantic": semantic}
        if resume and not as_job:
            last = s.scalar(
                select(DedupRun).where(DedupRun.corpus_id == row.id).order_by(DedupRun.id.desc())
            )
            if (
                last is not None
                and last.job_id is None
                and last.status in ("queued", "running", "failed")
                and last.params == params
                and last.thresholds == th.to_dict()
            ):
                return last.id
        run = DedupRun(
            corpus_id=row.id,
            status="queued",
            thresholds=th.to_dict(),
            params=params,
            code_version=__version__,
        )
        s.add(run)
        s.flush()
        if as_job:  # the job row is splitaudit.indexer.jobs.queue's to write
            run.job_id = enqueue(s, kind="dedup", params={"dedup_id": run.id}).id
        return run.id


def run_dedup(
    ws: Workspace,
    run_id: int,
    *,
    progress: ProgressFn | None = None,
    chunk_rows: int = CHUNK_ROWS,
    executor: Executor | None = None,
) -> dict[str, Any]:
    """Run (or resume) a dedup; returns its summary. Marks the run failed (re-raising) on error.

    ``chunk_rows`` items are searched and committed together: the unit a killed run resumes at.
    An exception from ``progress`` (a job being cancelled) stops the run where it is, resumable.
    ``executor``: here (the default) or on Ray actors (``pipeline.ray_match.Executor``); the
    same result either way.
    """
    report = progress or (lambda _f, _m: None)
    try:
        return _run(ws, run_id, report, chunk_rows, executor or Executor())
    except Exception as exc:  # not BaseException: an interrupted run stays resumable
        with transaction(ws.sessions) as s:
            run = s.get_one(DedupRun, run_id)
            run.status, run.error = "failed", str(exc) or type(exc).__name__
        raise


def _run(
    ws: Workspace, run_id: int, report: ProgressFn, chunk_rows: int, executor: Executor
) -> dict[str, Any]:
    with transaction(ws.sessions) as s:
        run = s.get(DedupRun, run_id)
        if run is None:
            raise NotFoundError(f"dedup run {run_id} does not exist")
        corpus = s.get_one(Corpus, run.corpus_id)
        if run.status == "done":
            run.chunks_done = (
                0  # run again from scratch: the corpus or the reviews may have changed
            )
        if run.generation != corpus.generation or run.status == "done":
            s.execute(delete(DedupEdge).where(DedupEdge.run_id == run_id))
            run.generation, run.chunks_done = corpus.generation, 0
        run.status, run.error = "running", None
        corpus_id, name, done = corpus.id, corpus.name, run.chunks_done
        th = Thresholds.from_mapping(run.thresholds)
        keep, semantic = (
            str(run.params.get("keep", DEFAULT_POLICY)),
            bool(run.params.get("semantic")),
        )
        items = int(s.scalar(select(func.count(Item.id)).where(Item.corpus_id == corpus_id)) or 0)
    clock = PhaseClock()
    with ExitStack() as stack:
        ray_run = None
        if executor.kind == "ray":
            from splitaudit.indexer.dedup.ray_run import RayDedup

            # started first: the actors open the index while the driver reads the exact groups
            ray_run = RayDedup(
                ws,
                corpus=name,
                address=executor.ray_address,
                workers=executor.workers,
                actors=executor.actors,
            )
            stack.callback(ray_run.close)
        report(0.01, "opening the index")
        with clock.phase("open_index"):
            index = open_corpus_index(ws, name)
        has_vectors = index.floats is not None and index.floats.count > 0
        with clock.phase("exact_groups"), ws.sessions() as s:
            groups = list(exact_groups(s, corpus_id))
        skip = {i for g in groups for i in g[1:]}
        grouped = {i for g in groups for i in g}
        with clock.phase("items_read"), ws.sessions() as s:
            queried = read_join_items(s, corpus_id, skip, small_side=th.small_side)
        with ws.sessions() as s:
            # every item's searches at once (near-linear), read back chunk by chunk below
            index, joins = join_corpus(
                s,
                corpus_id=corpus_id,
                corpus_dir=ws.corpus_dir(name),
                index=index,
                thresholds=th,
                skip=skip,
                progress=lambda m: report(0.02, m),
                clock=clock,
                joins=ray_run.joins if ray_run is not None else None,
                items=queried,
            )
        with clock.phase("candidates"), ws.sessions() as s:
            # only items with another item in a join table reach the engine (~8% of them)
            refs = vector_batches(s, corpus_id) if has_vectors else []
            corpus_dir = ws.corpus_dir(name)
            candidates = candidate_items(
                index,
                queried,
                th,
                grouped,
                (lambda: iter_chunks(corpus_dir, refs)) if refs else None,
            )
        joins["candidates"] = None if candidates is None else len(candidates)
        del queried
        if ray_run is not None:
            joins["shard_bytes_mapped"] = ray_run.joins.mapped
        log.info("dedup %d: self-joins %s", run_id, joins)
        seen = 0
        sizes: dict[int, int] = {}  # items of the chunks handed out and not yet committed

        def pending(chunks: Iterable[Chunk]) -> Iterator[tuple[int, Chunk]]:
            """The numbered chunks not committed by an earlier, interrupted attempt."""
            nonlocal seen
            for n, chunk in enumerate(chunks):
                if n < done:
                    seen += len(chunk.ids)
                    continue
                sizes[n] = len(chunk.ids)
                yield n, chunk

        # corpus images' verification features, kept between runs
        with open_verify_store(ws.home) as store, ws.sessions() as s:
            chunks = keep_candidates(
                pending(
                    timed_iter(
                        iter_item_chunks(
                            s,
                            corpus_id,
                            ws.corpus_dir(name),
                            has_vectors=has_vectors,
                            rows=chunk_rows,
                        ),
                        clock,
                        "chunk_vectors",
                    )
                ),
                candidates,
            )
            job = ChunkJob(corpus_id, th, semantic, frozenset(skip), frozenset(grouped))
            found: Generator[tuple[int, list[Edge]], None, None]
            if ray_run is not None:
                found = ray_run.edges(index, chunks, job)
            else:
                found = (
                    (n, _chunk_edges(s, index, chunk, job, store, skip, grouped, clock))
                    for n, chunk in chunks
                )
            # closed on any exit: a Ray run's actors (and a Ray instance it started) go at once
            with closing(found):
                for n, edges in found:
                    seen += sizes.pop(n)
                    with clock.phase("edges_write"), transaction(ws.sessions) as w:
                        insert_rows(w, DedupEdge, EDGE_COLUMNS, edge_rows(run_id, edges))
                        w.get_one(DedupRun, run_id).chunks_done = n + 1
                    report(
                        0.05 + 0.85 * min(seen / items, 1.0) if items else 0.9,
                        f"searched {seen} of {items} items",
                    )
    report(0.9, "grouping clusters")
    with clock.phase("clusters"):
        summary = _finish(ws, run_id, corpus_id, items, groups, keep, semantic)
    log.info("dedup %d: CPU by phase %s", run_id, clock.to_dict())
    return summary


def _chunk_edges(
    session: Session,
    index: CorpusIndex,
    chunk: Chunk,
    job: ChunkJob,
    store: VerifyStore | None,
    skip: set[int],
    grouped: set[int],
    clock: PhaseClock,
) -> list[Edge]:
    """One chunk's edges, here (the local executor)."""
    return chunk_edges(
        session,
        corpus_id=job.corpus_id,
        index=index,
        chunk=chunk,
        skip=skip,
        thresholds=job.thresholds,
        semantic=job.semantic,
        store=store,
        grouped=grouped,
        clock=clock,
    )


def _finish(
    ws: Workspace,
    run_id: int,
    corpus_id: int,
    items: int,
    groups: list[list[int]],
    keep: str,
    semantic: bool,
) -> dict[str, Any]:
    """Group the run's pairs (plus exact groups, minus reviewed ones), keep one per cluster, store."""
    with ws.sessions() as s:
        query = select(*(DedupEdge.__table__.c[c] for c in EDGE_COLUMNS[1:])).where(
            DedupEdge.run_id == run_id
        )
        found: list[Edge] = [
            Edge(int(a), int(b), str(k), h, c, v)
            for rows in fetch_tuples(s, query)
            for a, b, k, h, c, v in rows
        ]
        found += [Edge(g[0], other, MatchKind.EXACT) for g in groups for other in g[1:]]
        merged = apply_reviews(merge_edges(found), pair_verdicts(s, corpus_id))
        visual = [e for e in merged.values() if e.kind != MatchKind.SEMANTIC]
        sem = [e for e in merged.values() if e.kind == MatchKind.SEMANTIC] if semantic else []
        info = member_info(s, {i for e in visual + sem for i in (e.a, e.b)})
    clusters = build_clusters(visual, info, keep)
    sem_clusters = build_clusters(sem, info, keep, semantic=True)
    summary = summarize(items, clusters, sem_clusters)
    with transaction(ws.sessions) as s:
        s.execute(delete(DedupMember).where(DedupMember.run_id == run_id))
        insert_rows(
            s,
            DedupMember,
            MEMBER_COLUMNS,
            member_tuples(run_id, clusters) + member_tuples(run_id, sem_clusters),
        )
        run = s.get_one(DedupRun, run_id)
        run.summary, run.status, run.finished_at = summary, "done", datetime.now(UTC)
    return summary


EDGE_COLUMNS = ("run_id", "a_id", "b_id", "kind", "hamming", "cosine", "verify")
MEMBER_COLUMNS = (
    "run_id",
    "cluster",
    "semantic",
    "item_id",
    "kept",
    "tier",
    "partner_id",
    "hamming",
    "cosine",
    "verify",
)


def edge_rows(run_id: int, edges: Iterable[Edge]) -> list[tuple[Any, ...]]:
    """The ``dedup_edge`` rows of a chunk's pairs, in ``EDGE_COLUMNS`` order."""
    return [(run_id, e.a, e.b, str(e.kind), e.hamming, e.cosine, e.verify) for e in edges]


def member_tuples(run_id: int, clusters: list[Cluster]) -> list[tuple[Any, ...]]:
    """The ``dedup_member`` rows of a run's clusters, in ``MEMBER_COLUMNS`` order."""
    return [
        (
            run_id,
            n,
            c.semantic,
            m.item_id,
            m.kept,
            str(m.tier),
            m.partner_id,
            m.hamming,
            m.cosine,
            m.verify,
        )
        for n, c in enumerate(clusters, start=1)
        for m in c.members
    ]


def member_rows(run_id: int, clusters: list[Cluster]) -> list[dict[str, Any]]:
    """The ``dedup_member`` rows of a run's clusters (for a bulk insert)."""
    return [
        dict(
            run_id=run_id,
            cluster=n,
            semantic=c.semantic,
            item_id=m.item_id,
            kept=m.kept,
            tier=m.tier,
            partner_id=m.partner_id,
            hamming=m.hamming,
            cosine=m.cosine,
            verify=m.verify,
        )
        for n, c in enumerate(clusters, start=1)
        for m in c.members
    ]


def member_info(session: Any, ids: set[int]) -> dict[int, MemberInfo]:
    """What the keep policies need about each item."""
    wanted = sorted(ids)
    out: dict[int, MemberInfo] = {}
    columns = [Item.key, Item.width, Item.height, Item.locator]
    for item_id, key, w, h, locator in rows_by_id(session, columns, wanted):
        out[int(item_id)] = MemberInfo(int(item_id), str(key), w, h, stored_bytes(locator))
    return out
