"""Reviewing matches: list them with filters, record verdicts (history kept), read the history.

Query functions ``(session, *, ...)``; they never commit. The newest ``review`` row of a
match is its current verdict; older rows are its history.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, case, func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Audit, Item, Match, Review, Shard, SplitItem
from splitaudit.indexer.errors import NotFoundError, UsageError
from splitaudit.indexer.reporting.report import (
    KIND_RANK,
    KINDS,
    latest_review_ids,
    match_dict,
    review_dict,
)

VERDICTS = ("duplicate", "not_duplicate", "unsure")
# Accepted by ``list_matches(review=...)`` besides a verdict.
REVIEW_STATES = ("reviewed", "unreviewed")
MAX_PAGE_SIZE = 500
MAX_NOTE_CHARS = 10_000


def check_verdict(verdict: str) -> str:
    """``verdict`` if it is one of ``VERDICTS``, else ``UsageError``."""
    if verdict not in VERDICTS:
        raise UsageError(f"unknown verdict {verdict!r}; use one of {', '.join(VERDICTS)}")
    return verdict


def _match_rows(latest: Any) -> Select[Match, SplitItem, Item, str, Review]:
    """Matches with their split item, corpus item, shard name and current review (``latest``)."""
    return (
        select(Match, SplitItem, Item, Shard.name, Review)
        .join(SplitItem, Match.split_item_id == SplitItem.id)
        .outerjoin(Item, Match.item_id == Item.id)
        .outerjoin(Shard, Item.shard_id == Shard.id)
        .outerjoin(latest, latest.c.match_id == Match.id)
        .outerjoin(Review, Review.id == latest.c.review_id)
    )


def _filtered(
    audit_id: int, kind: str | None, review: str | None, label: str | None
) -> Select[Match, SplitItem, Item, str, Review]:
    latest = latest_review_ids()
    query = _match_rows(latest).where(Match.audit_id == audit_id)
    if kind is not None:
        if kind not in KINDS:
            raise UsageError(f"unknown match kind {kind!r}; use one of {', '.join(KINDS)}")
        query = query.where(Match.kind == kind)
    if review is not None:
        if review == "unreviewed":
            query = query.where(latest.c.review_id.is_(None))
        elif review == "reviewed":
            query = query.where(latest.c.review_id.is_not(None))
        elif review in VERDICTS:
            query = query.where(Review.verdict == review)
        else:
            raise UsageError(
                f"unknown review filter {review!r}; use one of {', '.join(VERDICTS + REVIEW_STATES)}"
            )
    if label is not None:
        query = query.where(SplitItem.label == label)
    return query


def split_item_dict(item: SplitItem) -> dict[str, Any]:
    """The test-side image of a match."""
    return {
        "id": item.id,
        "key": item.key,
        "label": item.label,
        "uri": item.uri,
        "caption": item.caption,
        "sha256": item.sha256,
        "pixel_digest": item.pixel_digest,
        "width": item.width,
        "height": item.height,
        "error": item.error,
    }


def _row_dict(
    m: Match, split_item: SplitItem, item: Item | None, shard: str | None, review: Review | None
) -> dict[str, Any]:
    out = match_dict(m, item, shard, review_dict(review) if review is not None else None)
    out["audit_id"] = m.audit_id
    out["split_item"] = split_item_dict(split_item)
    if item is not None:
        out["corpus_item"] = {
            "id": item.id,
            "key": item.key,
            "uri": item.uri,
            "url": item.url,
            "caption": item.caption,
            "label": item.label,
            "license": item.license,
            "shard": shard,
            "sha256": item.sha256,
            "width": item.width,
            "height": item.height,
            "metadata": item.meta or {},
        }
    else:
        out["corpus_item"] = None
    return out


def list_matches(
    session: Session,
    *,
    audit_id: int,
    kind: str | None = None,
    review: str | None = None,
    label: str | None = None,
    page: int = 1,
    page_size: int = 50,
) -> tuple[list[dict[str, Any]], int]:
    """One page of an audit's matches (strongest kind, then best score first) and the total.

    ``review`` filters by current verdict (``duplicate`` / ``not_duplicate`` / ``unsure``)
    or by state (``reviewed`` / ``unreviewed``); ``label`` by the test item's label.
    """
    if page < 1:
        raise UsageError(f"page must be 1 or more, not {page}")
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise UsageError(f"page_size must be between 1 and {MAX_PAGE_SIZE}, not {page_size}")
    if session.get(Audit, audit_id) is None:
        raise NotFoundError(f"audit {audit_id} does not exist; list audits with GET /api/v1/audits")
    query = _filtered(audit_id, kind, review, label)
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rank = case(KIND_RANK, value=Match.kind, else_=len(KINDS))
    rows = session.execute(
        query.order_by(rank, Match.score.desc().nulls_last(), Match.id)
        .limit(page_size)
        .offset((page - 1) * page_size)
    ).all()
    return [_row_dict(m, si, it, sh, rv) for m, si, it, sh, rv in rows], int(total)


def get_match(session: Session, *, match_id: int) -> Match:
    """The match ``match_id``; ``NotFoundError`` if there is none."""
    match = session.get(Match, match_id)
    if match is None:
        raise NotFoundError(
            f"match {match_id} does not exist; list an audit's matches with "
            "GET /api/v1/audits/{id}/matches"
        )
    return match


def match_detail(session: Session, *, match_id: int) -> dict[str, Any]:
    """One match with both images' provenance, its current review and its review history."""
    match = get_match(session, match_id=match_id)
    row = session.execute(_match_rows(latest_review_ids()).where(Match.id == match.id)).one()
    out = _row_dict(row[0], row[1], row[2], row[3], row[4])
    out["history"] = review_history(session, match_id=match_id)
    return out


def set_review(
    session: Session, *, match_id: int, verdict: str, note: str | None, reviewer: str | None
) -> Review:
    """Record a verdict on a match (a new row: earlier verdicts stay as history); flushed, not committed."""
    check_verdict(verdict)
    if note is not None and len(note) > MAX_NOTE_CHARS:
        raise UsageError(f"note is {len(note)} characters long; keep it under {MAX_NOTE_CHARS}")
    get_match(session, match_id=match_id)
    review = Review(match_id=match_id, verdict=verdict, note=note or None, reviewer=reviewer)
    session.add(review)
    session.flush()
    return review


def review_history(session: Session, *, match_id: int) -> list[dict[str, Any]]:
    """Every verdict recorded on a match, newest first."""
    get_match(session, match_id=match_id)
    rows = session.scalars(
        select(Review).where(Review.match_id == match_id).order_by(Review.id.desc())
    ).all()
    return [{"id": r.id, **review_dict(r)} for r in rows]
