"""Read-only queries the UI pages need beyond the API's: score histograms, review counts, siblings.

Query functions ``(session, *, ...)``; they never commit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, cast, func, select
from sqlalchemy.orm import Session, aliased

from splitaudit.indexer.db.models import Item, Match, Review, SplitDuplicate, SplitItem
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.reporting.report import latest_review_ids

MAX_LABELS = 2000


@dataclass(frozen=True)
class ScoreCounts:
    """Counts of an audit's visual matches per (bucket, kind): cosine in 1/100 steps, Hamming per bit."""

    cosine: Counter[tuple[int, str]]
    hamming: Counter[tuple[int, str]]


def score_counts(session: Session, *, audit_id: int) -> ScoreCounts:
    """Match counts bucketed by cosine (``int(cosine * 100)``) and by Hamming distance, per kind."""
    visual = (Match.audit_id == audit_id, Match.kind != MatchKind.LABEL_LEAK)
    bucket = cast(Match.cosine * 100, Integer)
    cosine: Counter[tuple[int, str]] = Counter()
    for b, kind, n in session.execute(
        select(bucket, Match.kind, func.count())
        .where(*visual, Match.cosine.is_not(None))
        .group_by(bucket, Match.kind)
    ):
        cosine[(int(b), str(kind))] += int(n)
    hamming: Counter[tuple[int, str]] = Counter()
    for h, kind, n in session.execute(
        select(Match.hamming, Match.kind, func.count())
        .where(*visual, Match.hamming.is_not(None))
        .group_by(Match.hamming, Match.kind)
    ):
        hamming[(int(h or 0), str(kind))] += int(n)
    return ScoreCounts(cosine=cosine, hamming=hamming)


def review_counts(session: Session, *, audit_id: int) -> dict[str, int]:
    """Pairs of an audit by current verdict, plus ``unreviewed`` and ``total``."""
    latest = latest_review_ids()
    rows = session.execute(
        select(Review.verdict, func.count(Match.id))
        .select_from(Match)
        .outerjoin(latest, latest.c.match_id == Match.id)
        .outerjoin(Review, Review.id == latest.c.review_id)
        .where(Match.audit_id == audit_id)
        .group_by(Review.verdict)
    ).all()
    out = {"duplicate": 0, "not_duplicate": 0, "unsure": 0, "unreviewed": 0}
    for verdict, n in rows:
        out[verdict or "unreviewed"] = out.get(verdict or "unreviewed", 0) + int(n)
    out["total"] = sum(out.values())
    return out


def match_kind_counts(session: Session, *, audit_id: int) -> dict[str, int]:
    """Pairs (not images) of an audit per kind."""
    rows = session.execute(
        select(Match.kind, func.count(Match.id))
        .where(Match.audit_id == audit_id)
        .group_by(Match.kind)
    ).all()
    return {str(k): int(n) for k, n in rows}


def split_labels(session: Session, *, split_id: int) -> list[str]:
    """The distinct labels of a split's items, sorted (at most ``MAX_LABELS``)."""
    return [
        str(v)
        for v in session.scalars(
            select(SplitItem.label)
            .where(SplitItem.split_id == split_id, SplitItem.label.is_not(None))
            .distinct()
            .order_by(SplitItem.label)
            .limit(MAX_LABELS)
        )
    ]


def split_duplicate_rows(
    session: Session, *, audit_id: int, limit: int = 200
) -> tuple[list[dict[str, Any]], int]:
    """Within-split duplicates of an audit with both items' keys and ids, and their total."""
    a, b = aliased(SplitItem), aliased(SplitItem)
    total = (
        session.scalar(
            select(func.count(SplitDuplicate.id)).where(SplitDuplicate.audit_id == audit_id)
        )
        or 0
    )
    rows = session.execute(
        select(SplitDuplicate, a.key, b.key)
        .join(a, a.id == SplitDuplicate.a_id)
        .join(b, b.id == SplitDuplicate.b_id)
        .where(SplitDuplicate.audit_id == audit_id)
        .order_by(SplitDuplicate.id)
        .limit(limit)
    ).all()
    return [
        {
            "a_id": d.a_id,
            "b_id": d.b_id,
            "a": ak,
            "b": bk,
            "kind": d.kind,
            "cosine": d.cosine,
            "hamming": d.hamming,
        }
        for d, ak, bk in rows
    ], int(total)


def failed_split_items(
    session: Session, *, split_id: int, limit: int = 200
) -> tuple[list[dict[str, Any]], int]:
    """Split items that could not be read, with the reason, and their total."""
    where = (SplitItem.split_id == split_id, SplitItem.error.is_not(None))
    total = session.scalar(select(func.count(SplitItem.id)).where(*where)) or 0
    rows = session.scalars(
        select(SplitItem).where(*where).order_by(SplitItem.key).limit(limit)
    ).all()
    return [{"id": r.id, "key": r.key, "reason": r.error} for r in rows], int(total)


def sibling_matches(
    session: Session, *, audit_id: int, split_item_id: int, exclude: int, limit: int = 20
) -> list[dict[str, Any]]:
    """Other findings of the same test image in the same audit (kind, corpus item key, scores)."""
    rows = session.execute(
        select(Match, Item.key)
        .outerjoin(Item, Item.id == Match.item_id)
        .where(
            Match.audit_id == audit_id, Match.split_item_id == split_item_id, Match.id != exclude
        )
        .order_by(Match.id)
        .limit(limit)
    ).all()
    return [
        {
            "id": m.id,
            "kind": m.kind,
            "corpus": m.corpus,
            "corpus_key": key,
            "cosine": m.cosine,
            "hamming": m.hamming,
        }
        for m, key in rows
    ]
