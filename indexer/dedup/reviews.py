"""Reviewer verdicts on dedup cluster members, kept per item pair and respected by the next run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import DedupMember, DedupReview, DedupRun
from splitaudit.indexer.errors import NotFoundError, UsageError
from splitaudit.indexer.timefmt import iso

VERDICTS = ("duplicate", "not_duplicate", "unsure")


def pair_verdicts(session: Session, corpus_id: int) -> dict[tuple[int, int], str]:
    """The current (newest) verdict of every reviewed pair of a corpus."""
    newest = (
        select(func.max(DedupReview.id))
        .where(DedupReview.corpus_id == corpus_id)
        .group_by(DedupReview.a_id, DedupReview.b_id)
    )
    return {
        (int(a), int(b)): str(v)
        for a, b, v in session.execute(
            select(DedupReview.a_id, DedupReview.b_id, DedupReview.verdict).where(
                DedupReview.id.in_(newest)
            )
        )
    }


def review_member(
    session: Session,
    *,
    run_id: int,
    item_id: int,
    verdict: str,
    note: str | None = None,
    reviewer: str | None = None,
) -> dict[str, Any]:
    """Record a verdict on a member of a run's (non-semantic) cluster against every other member.

    ``not_duplicate``: the next run drops those pairs, so the member leaves the cluster unless
    another, unreviewed link holds it there. ``duplicate``: the pairs stay linked even if a
    later run's thresholds would not find them. Does not commit.
    """
    if verdict not in VERDICTS:
        raise UsageError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    run = session.get(DedupRun, run_id)
    if run is None:
        raise NotFoundError(f"dedup run {run_id} does not exist")
    member = session.scalar(
        select(DedupMember).where(
            DedupMember.run_id == run_id,
            DedupMember.item_id == item_id,
            DedupMember.semantic.is_(False),
        )
    )
    if member is None:
        raise NotFoundError(f"item {item_id} is not in a duplicate cluster of dedup run {run_id}")
    others = session.scalars(
        select(DedupMember.item_id).where(
            DedupMember.run_id == run_id,
            DedupMember.cluster == member.cluster,
            DedupMember.semantic.is_(False),
            DedupMember.item_id != item_id,
        )
    ).all()
    rows = [
        DedupReview(
            corpus_id=run.corpus_id,
            a_id=min(item_id, o),
            b_id=max(item_id, o),
            subject_id=item_id,
            verdict=verdict,
            note=note,
            reviewer=reviewer,
        )
        for o in others
    ]
    session.add_all(rows)
    session.flush()
    return {
        "run_id": run_id,
        "item_id": item_id,
        "cluster": member.cluster,
        "verdict": verdict,
        "note": note,
        "reviewer": reviewer,
        "pairs": len(rows),
        "at": iso(rows[0].created_at) if rows else None,
    }


def member_verdicts(session: Session, corpus_id: int, item_ids: list[int]) -> dict[int, str]:
    """Per item: the newest verdict a reviewer gave on that item (for display)."""
    out: dict[int, str] = {}
    for start in range(0, len(item_ids), 500):
        chunk = item_ids[start : start + 500]
        for subject, verdict in session.execute(
            select(DedupReview.subject_id, DedupReview.verdict)
            .where(DedupReview.corpus_id == corpus_id, DedupReview.subject_id.in_(chunk))
            .order_by(DedupReview.id)
        ):
            out[int(subject)] = str(verdict)
    return out
