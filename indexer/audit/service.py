"""Audit entry points shared by the CLI and the API: register a split, create and run an audit.

The service writes ``Audit`` (and its matches); the audit's ``Job`` row is written by
``splitaudit.indexer.jobs.queue`` alone: queued by ``enqueue``, then run by a worker
(``execute_audit``) or here in the calling process (``run_audit``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from splitaudit.indexer import __version__
from splitaudit.indexer.audit.ingest import ingest_split
from splitaudit.indexer.audit.label_tier import LabelTierResult, label_leak_matches
from splitaudit.indexer.captions.query import CaptionThresholds, split_caption_thresholds
from splitaudit.indexer.captions.tier import caption_matches
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Audit, Item, Match, Split, SplitDuplicate, SplitItem
from splitaudit.indexer.db.queries import get_corpus
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import (
    EmptyAuditError,
    ModelUnavailableError,
    SplitauditError,
    UsageError,
)
from splitaudit.indexer.jobs.queue import (
    enqueue,
    fail_orphaned_local,
    job_error_text,
    local_owner,
    mark_done,
    mark_failed,
    mark_running,
)
from splitaudit.indexer.match.corpus_thresholds import thresholds_for_corpus
from splitaudit.indexer.match.engine import match_corpus, split_duplicates
from splitaudit.indexer.match.found import FoundMatch
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.match.verify_store import open_verify_store
from splitaudit.indexer.pipeline.index import open_corpus_index
from splitaudit.indexer.pipeline.progress_log import try_count_images
from splitaudit.indexer.pipeline.ray_match import Executor, match_corpus_on_ray
from splitaudit.indexer.reporting.report import compute_summary
from splitaudit.indexer.sources.record import Source
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)
ProgressFn = Callable[[float, str], None]
EmbedderFactory = Callable[[str], Embedder]


@dataclass(frozen=True, slots=True)
class CorpusRef:
    """What an audit run needs of a corpus row, read once before the long work starts."""

    id: int
    name: str
    model_id: str | None
    model_spec: str | None
    items: int = 0


def _item_count(s: Session, corpus_id: int) -> int:
    """Indexed images of a corpus (0: never indexed, or nothing readable)."""
    return int(s.scalar(select(func.count(Item.id)).where(Item.corpus_id == corpus_id)) or 0)


def _split_item_count(ws: Workspace, split_id: int) -> int:
    """Items (readable or not) stored for a split."""
    with ws.sessions() as s:
        return int(
            s.scalar(select(func.count(SplitItem.id)).where(SplitItem.split_id == split_id)) or 0
        )


def submit_audit(
    ws: Workspace,
    *,
    split_uri: str,
    name: str,
    corpora: Sequence[str],
    labels: Mapping[str, str] | None = None,
    root: str = "",
    thresholds: Mapping[str, Any] | Thresholds | None = None,
    params: Mapping[str, Any] | None = None,
    local: bool = True,
) -> int:
    """Register a split and its audit in one transaction (nothing stored on any error); the audit id.

    ``split_uri`` is what ``open_split`` reads when the audit runs (``split_location``);
    ``labels`` override the split's own. ``local`` (the default): the audit's job belongs
    to this process (run it with ``run_audit``; no worker claims it); ``local=False``
    queues it for a worker (the API).
    """
    with transaction(ws.sessions) as s:
        split_id = _add_split(s, split_uri=split_uri, name=name, labels=labels, root=root)
        return _add_audit(
            s,
            ws,
            split_id=split_id,
            corpora=corpora,
            thresholds=thresholds,
            params=params,
            local=local,
        )


def create_split(
    ws: Workspace,
    source: Source,
    *,
    name: str,
    labels: Mapping[str, str] | None = None,
    root: str = "",
) -> int:
    """Register a split (fast: nothing is read until the audit runs); returns its id."""
    with transaction(ws.sessions) as s:
        return _add_split(s, split_uri=source.uri, name=name, labels=labels, root=root)


def create_audit(
    ws: Workspace,
    *,
    split_id: int,
    corpora: Sequence[str],
    thresholds: Mapping[str, Any] | Thresholds | None = None,
    params: Mapping[str, Any] | None = None,
    local: bool = True,
) -> int:
    """Create an audit of a registered split against named corpora (its job: see ``submit_audit``)."""
    with transaction(ws.sessions) as s:
        s.get_one(Split, split_id)
        return _add_audit(
            s,
            ws,
            split_id=split_id,
            corpora=corpora,
            thresholds=thresholds,
            params=params,
            local=local,
        )


def _add_split(
    s: Session, *, split_uri: str, name: str, labels: Mapping[str, str] | None, root: str
) -> int:
    split = Split(name=name, root=root, source=split_uri, labels=dict(labels or {}))
    s.add(split)
    s.flush()
    return split.id


def _add_audit(
    s: Session,
    ws: Workspace,
    *,
    split_id: int,
    corpora: Sequence[str],
    thresholds: Mapping[str, Any] | Thresholds | None,
    params: Mapping[str, Any] | None,
    local: bool,
) -> int:
    """The audit row and its job (owned by this process, or queued); thresholds validated against the corpus's own (``thresholds_for_corpus``)."""
    if not corpora:
        raise UsageError("name at least one corpus to audit against (--corpus NAME)")
    models = [get_corpus(s, name=name).model_id for name in corpora]
    params = dict(params or {})
    caption_th = CaptionThresholds()
    if isinstance(thresholds, Thresholds):
        th = thresholds
    else:
        other, caption_th = split_caption_thresholds(dict(thresholds or {}))
        # Cosine scales differ per model: start from the corpus's own (measured / calibrated) values.
        name, model = next(
            ((n, m) for n, m in zip(corpora, models, strict=True) if m), (corpora[0], None)
        )
        base, record = thresholds_for_corpus(ws.corpus_dir(name), model)
        th = Thresholds.from_mapping(other, base=base)
        if record is not None:
            params["threshold_source"] = dict(
                corpus=name,
                source=record.source,
                summary=record.summary(),
                overridden=sorted(
                    set(thresholds or {}) & {"near_cosine", "semantic_cosine", "candidate_cosine"}
                ),
            )
    audit = Audit(
        split_id=split_id,
        corpora=list(dict.fromkeys(corpora)),
        thresholds={**th.to_dict(), **caption_th.to_dict()},
        params=params,
        code_version=__version__,
    )
    s.add(audit)
    s.flush()
    owner = local_owner() if local else None
    audit.job_id = enqueue(s, kind="audit", params={"audit_id": audit.id}, owner=owner).id
    return audit.id


def default_embedder_factory(spec: str) -> Embedder:
    """Load an embedder by spec (lazily imports torch/open_clip)."""
    from splitaudit.indexer.embed.loader import load_embedder

    return load_embedder(spec)


def run_audit(
    ws: Workspace,
    audit_id: int,
    *,
    progress: ProgressFn | None = None,
    workers: int = 1,
    embedder_factory: EmbedderFactory = default_embedder_factory,
    executor: Executor | None = None,
) -> None:
    """Run an audit in this process (no worker) and mark its job done (or failed, re-raising the error).

    Idempotent: partial results of a killed run are replaced; the results are committed
    before the job is marked done. ``executor``: where the matching runs (here by default,
    or on Ray actors: ``pipeline.ray_match``); the same results either way.
    """
    with ws.sessions() as s:
        job_id = s.get_one(Audit, audit_id).job_id
    fail_orphaned_local(ws.sessions)  # earlier local runs on this host that were killed
    if job_id is not None:
        mark_running(ws.sessions, job_id=job_id)
    try:
        execute_audit(
            ws,
            audit_id,
            progress=progress,
            workers=workers,
            embedder_factory=embedder_factory,
            executor=executor,
        )
    except Exception as exc:
        # Not BaseException: an interrupted run stays as it is, to be run again.
        if job_id is not None:
            if not isinstance(exc, SplitauditError):
                log.exception("audit %d crashed", audit_id)
            mark_failed(ws.sessions, job_id=job_id, error=job_error_text(exc))
        raise
    if job_id is not None:
        mark_done(ws.sessions, job_id=job_id)


def execute_audit(
    ws: Workspace,
    audit_id: int,
    *,
    progress: ProgressFn | None = None,
    workers: int = 1,
    embedder_factory: EmbedderFactory = default_embedder_factory,
    executor: Executor | None = None,
) -> None:
    """Compute an audit's matches and summary and store them on the ``Audit`` (the job is its runner's)."""
    from splitaudit.indexer.sources.open import open_split

    report = progress or (lambda _f, _m: None)
    phases = PhaseTimes()
    with ws.sessions() as s:
        audit = s.get_one(Audit, audit_id)
        split = s.get_one(Split, audit.split_id)
        corpora = [get_corpus(s, name=n) for n in audit.corpora]
        other_th, caption_th = split_caption_thresholds(audit.thresholds)
        th = Thresholds.from_mapping(other_th)
        split_id, split_source, split_count = split.id, split.source, split.item_count
        params = dict(audit.params)
        corpus_refs = [
            CorpusRef(c.id, c.name, c.model_id, c.model_spec, _item_count(s, c.id)) for c in corpora
        ]
    allow_empty = bool(params.get("allow_empty", False))
    empty = [c.name for c in corpus_refs if not c.items]
    if empty and not allow_empty:
        raise EmptyAuditError(
            f"corpus {', '.join(repr(n) for n in empty)} has no indexed images (never indexed, or "
            "every image failed), so an audit against it would check nothing: index it first "
            "(`splitaudit index SOURCE --corpus NAME`, or POST /api/v1/corpora/NAME/sources), or "
            "allow it with --allow-empty (allow_empty=true over the API)"
        )

    with phases.phase("load model"):
        model_info, embedders = _load_embedders(corpus_refs, embedder_factory)
    if "threshold_source" in params:  # the report and the UI say where the cosines came from
        model_info = dict(model_info, thresholds=params["threshold_source"])
    report(0.02, "reading split")
    # API submissions record the roots they were checked against; re-check them row by row now.
    source = open_split(split_source, allowed_roots=params.get("allowed_roots"))
    if not split_count:  # first read of this split: a cheap count (metadata, a walk) if any
        split_count = try_count_images([source]) or 0
    seen = 0

    def on_items(n: int) -> None:
        nonlocal seen
        seen += n
        frac = 0.05 + 0.55 * (min(seen / split_count, 1.0) if split_count else 0.0)
        of = f"/{split_count}" if split_count else ""
        report(frac, f"read {seen}{of} split images")

    state = ingest_split(
        ws,
        split_id,
        source,
        embedders=embedders,
        workers=workers,
        progress=on_items,
        phases=phases,
    )
    # A split whose files are all unreadable still gets a report listing them (and fails the
    # gate unless --max-unreadable allows them); a split with no file at all checks nothing.
    if not len(state) and not allow_empty and not _split_item_count(ws, split_id):
        raise EmptyAuditError(
            f"the split {split_source} has no images, so nothing would be audited: check the "
            "path (and, for a manifest, its rows), or allow an empty split with --allow-empty "
            "(allow_empty=true over the API)"
        )
    report(0.6, f"matching {len(state)} images")
    all_matches, index_info = _visual_matches(
        ws, state, corpus_refs, embedders, th, report, phases, executor or Executor()
    )
    with phases.phase("label tier"):
        label = _label_tier(
            ws, state, all_matches, dict(params, corpora_ids=[c.id for c in corpus_refs])
        )
    label_matches = label.matches if label else []
    with phases.phase("caption tier"):
        split_ids = state.ids.tolist()
        label_matches += [
            m
            for c in corpus_refs
            for m in caption_matches(ws, split_ids, c.name, thresholds=caption_th)
        ]
    dup_vectors = next(iter(state.vectors.values()), None) if state.vectors else None
    with phases.phase("split duplicates"):
        dups = split_duplicates(state, dup_vectors, th)
    with phases.phase("results (db)"), transaction(ws.sessions) as s:
        # Lock the audit row and replace its results in one transaction: a second run of the
        # same job (a retry after a lost lease, a second worker) never doubles them.
        s.get_one(Audit, audit_id, with_for_update=True)
        s.execute(delete(Match).where(Match.audit_id == audit_id))
        s.execute(delete(SplitDuplicate).where(SplitDuplicate.audit_id == audit_id))
        s.bulk_insert_mappings(Match, [m.row(audit_id) for m in all_matches + label_matches])  # type: ignore[arg-type]
        s.bulk_insert_mappings(
            SplitDuplicate,
            [  # type: ignore[arg-type]
                dict(
                    audit_id=audit_id,
                    a_id=int(state.ids[d.a]),
                    b_id=int(state.ids[d.b]),
                    kind=d.kind,
                    cosine=d.cosine,
                    hamming=d.hamming,
                )
                for d in dups
            ],
        )
        s.flush()
        audit = s.get_one(Audit, audit_id)
        audit.model = model_info
        audit.index_info = index_info
        audit.summary = compute_summary(s, audit_id)
        if label and label.prevalence:
            audit.summary = dict(audit.summary, label_prevalence=label.prevalence)
        audit.finished_at = datetime.now(UTC)
    phases.log()
    report(1.0, "done")


def _visual_matches(
    ws: Workspace,
    state: SplitState,
    corpora: Sequence[CorpusRef],
    embedders: Mapping[str, Embedder],
    th: Thresholds,
    report: ProgressFn,
    phases: PhaseTimes,
    executor: Executor,
) -> tuple[list[FoundMatch], dict[str, Any]]:
    """Exact, near and semantic matches of the split against each corpus, and each corpus index's info."""
    matches: list[FoundMatch] = []
    index_info: dict[str, Any] = {}
    # corpus images' verification features, kept between audits
    with open_verify_store(ws.home) as store:
        for n, corpus in enumerate(corpora):
            with phases.phase("open index"):
                index = open_corpus_index(ws, corpus.name)
            index_info[corpus.name] = index.info()
            vectors = (
                state.vectors.get(corpus.model_id)
                if corpus.model_id and corpus.model_id in embedders
                else None
            )
            on_progress = _verify_progress(report, n, len(corpora), corpus.name)
            if executor.kind == "ray":
                pairs = match_corpus_on_ray(
                    ws,
                    corpus=corpus.name,
                    corpus_id=corpus.id,
                    index=index,
                    state=state,
                    vectors=vectors,
                    thresholds=th,
                    address=executor.ray_address,
                    workers=executor.workers,
                    actors=executor.actors,
                    phases=phases,
                    on_batch=on_progress,
                )
            else:
                with ws.sessions() as s:
                    pairs = match_corpus(
                        s,
                        corpus_id=corpus.id,
                        index=index,
                        state=state,
                        vectors=vectors,
                        thresholds=th,
                        phases=phases,
                        store=store,
                        on_verify=on_progress,
                        regions=state.regions.get(corpus.model_id or "")
                        if vectors is not None
                        else None,
                        # overlay-only pairs: semantic only if their content embeds close too
                        content_embed=embedders[corpus.model_id].embed
                        if vectors is not None and corpus.model_id
                        else None,
                    ).pairs
            for p in pairs:
                assert p.kind is not None  # match_corpus returns classified pairs only
                matches.append(
                    FoundMatch(
                        split_item_id=int(state.ids[p.row]),
                        item_id=p.item_id,
                        corpus=corpus.name,
                        kind=p.kind,
                        cosine=p.cosine,
                        hamming=p.hamming,
                        score=_score(p.cosine, p.hamming),
                        evidence=p.evidence(),
                    )
                )
            report(0.6 + 0.3 * (n + 1) / len(corpora), f"matched against {corpus.name}")
    return matches, index_info


def _verify_progress(
    report: ProgressFn, n: int, corpora: int, name: str
) -> Callable[[int, int], None]:
    """The matching phase's progress (verified test images of corpus ``n``), about every 0.5%."""

    def on_verify(done: int, total: int) -> None:
        if done % max(1, total // 200) == 0:
            fraction = 0.6 + 0.3 * (n + done / max(total, 1)) / corpora
            report(fraction, f"verifying against {name}: {done}/{total} images with candidates")

    return on_verify


def _score(cosine: float | None, hamming: int | None) -> float:
    """One sortable similarity in [0, 1]: the better of cosine and 1 - hamming/64."""
    best = 0.0
    if cosine is not None:
        best = max(best, float(cosine))
    if hamming is not None:
        best = max(best, 1.0 - hamming / 64.0)
    return round(best, 4)


def _load_embedders(
    corpora: Sequence[CorpusRef], factory: EmbedderFactory
) -> tuple[dict[str, Any], dict[str, Embedder]]:
    """One embedder per distinct corpus model; unavailable ones make the semantic tier skipped."""
    embedders: dict[str, Embedder] = {}
    per_corpus: dict[str, dict[str, Any]] = {}
    for corpus in corpora:
        name, model_id, spec = corpus.name, corpus.model_id, corpus.model_spec
        if model_id is None:
            per_corpus[name] = {
                "model_id": None,
                "status": "skipped",
                "reason": "corpus was indexed without embeddings (--no-embed)"
                if corpus.items
                else "corpus has no indexed images",
            }
            continue
        if model_id not in embedders:
            try:
                if not spec:
                    raise ModelUnavailableError(
                        f"corpus {name!r} does not record how to load {model_id}"
                    )
                emb = factory(spec)
                if emb.model_id != model_id:
                    raise ModelUnavailableError(
                        f"model spec {spec!r} now loads {emb.model_id}, but the corpus was indexed with "
                        f"{model_id}; restore the original weights"
                    )
                embedders[model_id] = emb
            except ModelUnavailableError as exc:
                per_corpus[name] = {"model_id": model_id, "status": "skipped", "reason": str(exc)}
                continue
        per_corpus[name] = {"model_id": model_id, "status": "ok", "reason": None}
    statuses = {v["status"] for v in per_corpus.values()}
    skipped = [f"{n}: {v['reason']}" for n, v in per_corpus.items() if v["status"] == "skipped"]
    info = {
        "id": next((v["model_id"] for v in per_corpus.values() if v["status"] == "ok"), None),
        "semantic": "ok"
        if statuses == {"ok"}
        else ("skipped" if "ok" not in statuses else "partial"),
        "reason": "; ".join(skipped) or None,
        "corpora": per_corpus,
    }
    return info, embedders


def _label_tier(
    ws: Workspace, state: SplitState, matches: list[FoundMatch], params: Mapping[str, Any]
) -> LabelTierResult | None:
    """Label-leak matches (self-leak and match-leak), when the split has labels."""
    if not any(state.labels):
        return None
    return label_leak_matches(ws, state, matches, params)
