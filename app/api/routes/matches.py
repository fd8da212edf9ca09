"""Matches: one match with both images' provenance and its review history; record a verdict."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from splitaudit.app.deps import ReaderDep, SessionDep, TransactionDep, WriterDep
from splitaudit.app.params import IdPath
from splitaudit.app.schemas import MatchDetail, ReviewIn, ReviewOut
from splitaudit.indexer.review.matches import match_detail, set_review
from splitaudit.indexer.timefmt import iso

router = APIRouter(prefix="/matches", tags=["matches"])


@router.get("/{match_id}", response_model=MatchDetail, response_model_exclude_unset=True)
def match_get(match_id: IdPath, session: SessionDep, _caller: ReaderDep) -> dict[str, Any]:
    """A match: kind, scores, evidence, test and corpus item, current review and history."""
    return match_detail(session, match_id=match_id)


@router.put("/{match_id}/review", response_model=ReviewOut)
def match_review(
    match_id: IdPath, body: ReviewIn, session: TransactionDep, caller: WriterDep
) -> ReviewOut:
    """Record a verdict (duplicate, not_duplicate, unsure) with a note; earlier verdicts stay as history.

    The reviewer is the API token's name when tokens are configured, else ``anonymous``.
    """
    review = set_review(
        session, match_id=match_id, verdict=body.verdict, note=body.note, reviewer=caller.name
    )
    return ReviewOut(
        id=review.id,
        match_id=review.match_id,
        verdict=review.verdict,
        note=review.note,
        reviewer=review.reviewer,
        at=iso(review.created_at),
    )
