"""``dedup --by caption``: clusters of corpus items whose captions are exact or near copies.

Duplicated alt-text is itself a curation signal (a scraped site's captions copied onto other
photos, a re-upload with the same description). The caption index is synced, joined with
itself (:func:`~splitaudit.indexer.captions.self_join.caption_self_join`: the audit's caption
rules, boilerplate never pairs items), the pairs grouped by union-find, one member per cluster
kept by the ``--keep`` policy, and the run stored like an image dedup run (``DedupRun`` with
``params["by"] == "caption"``, ``DedupMember`` rows), so the same outputs, REST and UI read it.

A member's ``tier`` is ``caption`` and its ``verify`` the bigram Jaccard with its partner (1.0:
the same words after normalisation). Reviews of image pairs are not applied to caption runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer import __version__
from splitaudit.indexer.captions.query import PREFIX, CaptionThresholds
from splitaudit.indexer.captions.self_join import caption_self_join
from splitaudit.indexer.captions.sync import open_caption_index, sync_caption_index
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, DedupMember, DedupRun, Item
from splitaudit.indexer.db.queries import get_corpus, in_chunks
from splitaudit.indexer.dedup.clusters import build_clusters, summarize
from splitaudit.indexer.dedup.keep import DEFAULT_POLICY, check_policy
from splitaudit.indexer.dedup.outputs import dedup_report
from splitaudit.indexer.dedup.pairs import Edge
from splitaudit.indexer.dedup.service import member_info, member_rows
from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.workspace import Workspace

__all__ = ["BY_CAPTION", "caption_dedup_report", "caption_thresholds", "run_caption_dedup"]

log = logging.getLogger(__name__)
BY_CAPTION = "caption"
ProgressFn = Callable[[float, str], None]


def caption_thresholds(thresholds: Mapping[str, Any]) -> CaptionThresholds:
    """The caption thresholds of ``--threshold`` values; any other threshold is a usage error."""
    other = sorted(k for k in thresholds if not str(k).startswith(PREFIX))
    if other:
        raise UsageError(
            f"dedup --by caption takes only caption_* thresholds (e.g. caption_jaccard=0.7), "
            f"not {', '.join(other)}"
        )
    return CaptionThresholds.from_mapping(thresholds)


def run_caption_dedup(
    ws: Workspace,
    corpus: str,
    *,
    keep: str = DEFAULT_POLICY,
    thresholds: Mapping[str, Any] | None = None,
    progress: ProgressFn | None = None,
) -> int:
    """Cluster ``corpus`` by caption; store the run (status ``done``) and return its id."""
    check_policy(keep)
    th = caption_thresholds(dict(thresholds or {}))
    say = progress or (lambda _f, _m: None)
    with transaction(ws.sessions) as s:
        row = get_corpus(s, name=corpus)
        corpus_id = row.id
        run = DedupRun(
            corpus_id=corpus_id,
            status="running",
            thresholds=th.to_dict(),
            params={"keep": keep, "semantic": False, "by": BY_CAPTION},
            generation=row.generation,
            code_version=__version__,
        )
        s.add(run)
        s.flush()
        run_id = run.id
    try:
        say(0.01, "syncing the caption index")
        sync_caption_index(ws, corpus)
        index = open_caption_index(ws, corpus)
        say(0.05, "joining captions")
        join = caption_self_join(index, th, progress=lambda m: say(0.3, m))
        log.info("caption dedup %d: %s", run_id, join.stats)
        edges = [Edge(p.a, p.b, MatchKind.CAPTION, verify=round(p.jaccard, 4)) for p in join.pairs]
        say(0.9, "grouping clusters")
        with ws.sessions() as s:
            items = int(
                s.scalar(select(func.count(Item.id)).where(Item.corpus_id == corpus_id)) or 0
            )
            info = member_info(s, {i for e in edges for i in (e.a, e.b)})
        clusters = build_clusters(edges, info, keep)
        summary = summarize(items, clusters)
        dropped = int(summary["duplicates"])  # type: ignore[call-overload]
        summary["by_tier"] = {BY_CAPTION: dropped}
        summary["rate_by_tier"] = {BY_CAPTION: round(dropped / items, 6) if items else 0.0}
        summary["caption_pairs"] = {
            "exact": join.stats.get("exact_pairs", 0),
            "near": join.stats.get("near_pairs", 0),
        }
        summary["captions_indexed"] = join.stats.get("captions", 0)
        with transaction(ws.sessions) as s:
            s.bulk_insert_mappings(DedupMember, member_rows(run_id, clusters))  # type: ignore[arg-type]
            done = s.get_one(DedupRun, run_id)
            done.summary, done.status, done.finished_at = summary, "done", datetime.now(UTC)
    except Exception as exc:
        with transaction(ws.sessions) as s:
            failed = s.get_one(DedupRun, run_id)
            failed.status, failed.error = "failed", str(exc) or type(exc).__name__
        raise
    say(1.0, "done")
    return run_id


def caption_dedup_report(session: Session, run_id: int) -> dict[str, Any]:
    """The ``splitaudit.dedup/v1`` report of a caption run, plus ``by`` and each member's caption."""
    report = dedup_report(session, run_id)
    run = session.get_one(DedupRun, run_id)
    report["by"] = run.params.get("by", "image")
    ids = [m["item_id"] for c in report["clusters"] for m in c["members"]]
    captions: dict[int, str | None] = {}
    corpus_id = session.get_one(Corpus, run.corpus_id).id
    for part in in_chunks(ids):
        for item_id, caption in session.execute(
            select(Item.id, Item.caption).where(Item.id.in_(part), Item.corpus_id == corpus_id)
        ):
            captions[int(item_id)] = caption
    for c in report["clusters"]:
        for m in c["members"]:
            m["caption"] = captions.get(m["item_id"])
            m["jaccard"] = m["verify"]
    return report
