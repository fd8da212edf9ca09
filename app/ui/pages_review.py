"""Review pages: the paged, filtered queue of matched pairs and the single-pair view."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from splitaudit.app.audits import MatchFilters, get_audit
from splitaudit.app.deps import SessionDep
from splitaudit.app.params import IdPath, PageQuery, PageSizeQuery, PositionPath
from splitaudit.app.ui import queries
from splitaudit.app.ui.rendering import UiDep, UiReaderDep, UiRoute, query_string
from splitaudit.indexer.review.matches import REVIEW_STATES, VERDICTS, list_matches, match_detail

PAGE_SIZES = (25, 50, 100, 200)
REVIEW_FILTERS = (*REVIEW_STATES[::-1], *VERDICTS)
Filters = Annotated[MatchFilters, Depends()]


def _pair_context(session: Any, match: dict[str, Any]) -> dict[str, Any]:
    """What the pair view shows besides the match: its audit and the test image's other findings."""
    audit = get_audit(session, audit_id=match["audit_id"])
    siblings = queries.sibling_matches(
        session,
        audit_id=match["audit_id"],
        split_item_id=match["split_item"]["id"],
        exclude=match["id"],
    )
    return {"audit": audit, "siblings": siblings, "thresholds": audit["thresholds"] or {}}


router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


@router.get("/audits/{audit_id}/matches", include_in_schema=False)
def queue_page(
    audit_id: IdPath,
    request: Request,
    session: SessionDep,
    ui: UiDep,
    _caller: UiReaderDep,
    where: Filters,
    page: PageQuery = 1,
    page_size: PageSizeQuery = 50,
) -> Response:
    """One page of an audit's pairs, filtered by tier, label and review status."""
    audit = get_audit(session, audit_id=audit_id)
    filters = where.form()
    items, total = list_matches(
        session, audit_id=audit_id, **where.query(), page=page, page_size=page_size
    )
    first = (page - 1) * page_size
    for i, item in enumerate(items):
        item["pos"] = first + i + 1
    pages = max(1, -(-total // page_size))
    keep = {**filters, "page_size": page_size if page_size != 50 else None}
    return ui.page(
        request,
        "queue.html",
        {
            "nav": "audits",
            "title": f"Review audit {audit_id}",
            "audit": audit,
            "items": items,
            "total": total,
            "page": page,
            "pages": pages,
            "page_size": page_size,
            "page_sizes": PAGE_SIZES,
            "filters": filters,
            "filter_qs": query_string(filters),
            "review_filters": REVIEW_FILTERS,
            "labels": queries.split_labels(session, split_id=audit["split"]["id"]),
            "kind_counts": queries.match_kind_counts(session, audit_id=audit_id),
            "reviews": queries.review_counts(session, audit_id=audit_id),
            "page_url": lambda p: (
                f"/ui/audits/{audit_id}/matches" + query_string(keep, page=p if p > 1 else None)
            ),
        },
    )


@router.get("/audits/{audit_id}/review/{pos}", include_in_schema=False)
def pair_at_page(
    audit_id: IdPath,
    pos: PositionPath,
    request: Request,
    session: SessionDep,
    ui: UiDep,
    _caller: UiReaderDep,
    where: Filters,
) -> Response:
    """The pair at position ``pos`` (1-based) of the filtered queue, with next/previous by ``j``/``k``."""
    filters = where.form()
    pos = max(pos, 1)
    items, total = list_matches(session, audit_id=audit_id, **where.query(), page=pos, page_size=1)
    qs = query_string(filters)
    base = f"/ui/audits/{audit_id}/review/"
    if not items:
        audit = get_audit(session, audit_id=audit_id)
        return ui.page(
            request,
            "queue_end.html",
            {
                "nav": "audits",
                "title": "End of queue",
                "audit": audit,
                "total": total,
                "filter_qs": qs,
                "filters": filters,
                "last_url": f"{base}{total}{qs}" if total else None,
            },
            status=200,
        )
    match = match_detail(session, match_id=items[0]["id"])
    return ui.page(
        request,
        "pair.html",
        {
            "nav": "audits",
            "title": f"Pair {pos} of {total}",
            "m": match,
            "pos": pos,
            "total": total,
            "filters": filters,
            "filter_qs": qs,
            "base_url": base,
            "prev_url": f"{base}{pos - 1}{qs}" if pos > 1 else None,
            "next_url": f"{base}{pos + 1}{qs}" if pos < total else None,
            "queue_url": f"/ui/audits/{audit_id}/matches"
            + query_string(filters, page=(pos - 1) // 50 + 1),
            **_pair_context(session, match),
        },
    )


@router.get("/matches/{match_id}", include_in_schema=False)
def pair_page(
    match_id: IdPath, request: Request, session: SessionDep, ui: UiDep, _caller: UiReaderDep
) -> Response:
    """One pair by match id (a stable link to share)."""
    match = match_detail(session, match_id=match_id)
    return ui.page(
        request,
        "pair.html",
        {
            "nav": "audits",
            "title": f"Match {match_id}",
            "m": match,
            "pos": None,
            "total": None,
            "filters": MatchFilters().form(),
            "filter_qs": "",
            "base_url": "",
            "prev_url": None,
            "next_url": None,
            "queue_url": f"/ui/audits/{match['audit_id']}/matches",
            **_pair_context(session, match),
        },
    )
