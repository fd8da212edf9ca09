"""Audit pages: the list (with live progress), one audit's summary, the upload form, review exports."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from splitaudit.app.audits import STATUSES, get_audit, list_audits
from splitaudit.app.corpora import list_corpora
from splitaudit.app.deps import SessionDep, WorkspaceDep
from splitaudit.app.params import IdPath, PageQuery
from splitaudit.app.ui import queries
from splitaudit.app.ui.charts import cosine_histogram, hamming_histogram, label_bar_chart
from splitaudit.app.ui.export import review_baseline, review_csv, review_json, review_rows
from splitaudit.app.ui.rendering import UiDep, UiReaderDep, UiRoute, query_string
from splitaudit.indexer.db.models import Audit
from splitaudit.indexer.errors import NotFoundError
from splitaudit.indexer.kinds import ACTIVE_JOB_STATUSES, MATCH_KINDS
from splitaudit.indexer.match.thresholds import Thresholds

PAGE_SIZE = 25
ACTIVE = ACTIVE_JOB_STATUSES


def _flagged(summary: dict[str, Any] | None) -> dict[str, Any]:
    """Flagged counts per tier of an audit summary (zeros while it runs)."""
    summary = summary or {}
    by_kind = summary.get("by_kind") or {}
    return {
        "flagged": summary.get("flagged"),
        "items": summary.get("items"),
        "by_kind": {k: by_kind.get(k) for k in MATCH_KINDS},
    }


router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


@router.get("", include_in_schema=False)
def audits_page(
    request: Request,
    session: SessionDep,
    ui: UiDep,
    _caller: UiReaderDep,
    status: Annotated[str | None, Query()] = None,
    page: PageQuery = 1,
) -> Response:
    """Every audit, newest first: status, split, corpora, flagged counts per tier, progress."""
    items, total = list_audits(session, status=status or None, page=page, page_size=PAGE_SIZE)
    for item in items:
        item["flagged"] = _flagged(item["summary"])
    pages = max(1, -(-total // PAGE_SIZE))
    return ui.page(
        request,
        "audits.html",
        {
            "nav": "audits",
            "title": "Audits",
            "audits": items,
            "total": total,
            "page": page,
            "pages": pages,
            "status": status or "",
            "statuses": STATUSES,
            "page_url": lambda p: (
                "/ui" + query_string({"status": status}, page=p if p > 1 else None)
            ),
        },
    )


@router.get("/audits/new", include_in_schema=False)
def upload_page(request: Request, session: SessionDep, ui: UiDep, _caller: UiReaderDep) -> Response:
    """Start an audit from the browser: archive, corpora, labels, thresholds."""
    return ui.page(
        request,
        "upload.html",
        {
            "nav": "new",
            "title": "New audit",
            "corpora": list_corpora(session),
            "thresholds": Thresholds.from_mapping({}).to_dict(),
            "max_upload_mb": ui.settings.max_upload_mb,
        },
    )


@router.get("/audits/{audit_id}", include_in_schema=False)
def audit_page(
    audit_id: IdPath, request: Request, session: SessionDep, ui: UiDep, _caller: UiReaderDep
) -> Response:
    """One audit's summary: counts per tier, rates, per-label chart, thresholds, model, histograms."""
    audit = get_audit(session, audit_id=audit_id)
    row = session.get_one(Audit, audit_id)
    summary = audit["summary"] or {}
    thresholds = audit["thresholds"] or {}
    context: dict[str, Any] = {
        "nav": "audits",
        "title": f"Audit {audit_id}",
        "audit": audit,
        "summary": summary,
        "thresholds": thresholds,
        "model": audit["model"] or {},
        "index_info": row.index_info or {},
        "params": row.params or {},
        "done": audit["status"] == "done",
    }
    if audit["status"] == "done":
        counts = queries.score_counts(session, audit_id=audit_id)
        dups, dup_total = queries.split_duplicate_rows(session, audit_id=audit_id)
        failed, failed_total = queries.failed_split_items(session, split_id=row.split_id)
        context.update(
            reviews=queries.review_counts(session, audit_id=audit_id),
            pair_counts=queries.match_kind_counts(session, audit_id=audit_id),
            label_chart=label_bar_chart(summary.get("by_label") or {}),
            cosine_hist=cosine_histogram(counts.cosine, thresholds),
            hamming_hist=hamming_histogram(counts.hamming, thresholds),
            split_dups=dups,
            split_dup_total=dup_total,
            failed=failed,
            failed_total=failed_total,
            prevalence=summary.get("label_prevalence") or {},
        )
    return ui.page(request, "audit.html", context)


@router.get("/audits/{audit_id}/export.{fmt}", include_in_schema=False)
def review_export(
    audit_id: IdPath,
    fmt: str,
    ws: WorkspaceDep,
    session: SessionDep,
    ui: UiDep,
    _caller: UiReaderDep,
) -> Response:
    """The review of an audit as ``csv`` or ``json`` (every pair, current verdict), or ``baseline.json``."""
    if session.get(Audit, audit_id) is None:
        raise NotFoundError(f"audit {audit_id} does not exist; list audits at /ui")
    filename = f"audit-{audit_id}-review.{fmt}"
    disposition = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if fmt == "csv":

        def chunks() -> Any:
            with ws.sessions() as s:
                yield from review_csv(review_rows(s, audit_id=audit_id))

        return StreamingResponse(
            chunks(), media_type="text/csv; charset=utf-8", headers=disposition
        )
    if fmt == "json":
        return JSONResponse(
            review_json(audit_id, review_rows(session, audit_id=audit_id)), headers=disposition
        )
    if fmt == "baseline.json":
        doc = review_baseline(audit_id, review_rows(session, audit_id=audit_id))
        disposition = {
            "Content-Disposition": f'attachment; filename="audit-{audit_id}-baseline.json"'
        }
        return Response(
            json.dumps(doc, indent=2) + "\n", media_type="application/json", headers=disposition
        )
    raise NotFoundError(
        f"no export format {fmt!r}; use export.csv, export.json or export.baseline.json"
    )
