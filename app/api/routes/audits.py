"""Audits: submit a split (archive upload or server paths), list, status, report, matches."""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from splitaudit.app.audits import MatchFilters, get_audit, list_audits, require_done
from splitaudit.app.deps import ReaderDep, SessionDep, SettingsDep, WorkspaceDep, WriterDep
from splitaudit.app.jsonbody import read_json_body
from splitaudit.app.params import IdPath, PageQuery, PageSizeQuery
from splitaudit.app.paths import resolve_under_roots
from splitaudit.app.schemas import (
    AuditFromPaths,
    AuditOut,
    ErrorResponse,
    JobAccepted,
    MatchOut,
    Page,
)
from splitaudit.app.submit import (
    AuditRequest,
    audit_from_paths,
    audit_from_upload,
    normalise_label_names,
    remove_tree,
)
from splitaudit.app.uploads import receive_multipart
from splitaudit.indexer.reporting.models import Report
from splitaudit.indexer.review.matches import list_matches

router = APIRouter(prefix="/audits", tags=["audits"])

REPORT_MEDIA_TYPES = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "junit": "application/xml",
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
}
REPORT_SUFFIX = {"json": "json", "csv": "csv", "junit": "xml", "md": "md", "html": "html"}

_SUBMIT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["split", "corpus"],
                    "properties": {
                        "split": {
                            "type": "string",
                            "format": "binary",
                            "description": "zip or tar(.gz) archive of the test split",
                        },
                        "corpus": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "corpus name (repeat the field for several)",
                        },
                        "labels": {
                            "type": "string",
                            "format": "binary",
                            "description": "optional key,label CSV",
                        },
                        "label_names": {
                            "type": "string",
                            "format": "binary",
                            "description": "optional label id -> names file (JSON, CSV, txt)",
                        },
                        "thresholds": {"type": "string", "description": "optional JSON object"},
                        "name": {"type": "string"},
                        "allow_empty": {
                            "type": "boolean",
                            "description": "let an audit that checks nothing finish",
                        },
                        "image_column": {
                            "type": "string",
                            "description": "Hugging Face datasets: the image column",
                        },
                        "key_column": {
                            "type": "string",
                            "description": "Hugging Face datasets: the row key column",
                        },
                    },
                }
            },
            "application/json": {"schema": AuditFromPaths.model_json_schema()},
        },
    }
}


def _accepted(audit_id: int) -> JSONResponse:
    body = JobAccepted(
        id=audit_id,
        status="queued",
        kind="audit",
        links={"self": f"/api/v1/audits/{audit_id}", "report": f"/api/v1/audits/{audit_id}/report"},
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status.HTTP_202_ACCEPTED,
        headers={"Location": f"/api/v1/audits/{audit_id}"},
    )


async def _json_body(request: Request) -> AuditFromPaths:
    data = await read_json_body(
        request, example='{"manifest": "/data/test.jsonl", "corpus": ["laion"]}'
    )
    try:
        return AuditFromPaths.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from exc


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    openapi_extra=_SUBMIT_BODY,
    responses={
        415: {"model": ErrorResponse, "description": "Neither multipart/form-data nor JSON"}
    },
)
async def audit_submit(
    request: Request, ws: WorkspaceDep, settings: SettingsDep, _caller: WriterDep
) -> JSONResponse:
    """Queue an audit of an uploaded archive (multipart) or of a split on the server (JSON)."""
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype == "multipart/form-data":
        workdir = (
            ws.uploads_dir() / f"upload-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        )
        workdir.mkdir(parents=True)
        try:
            form = await receive_multipart(request, workdir, max_bytes=settings.max_upload_bytes)
            audit_id = await run_in_threadpool(
                audit_from_upload, ws, form, workdir, max_unpacked=settings.max_unpacked_bytes
            )
        except BaseException:
            await run_in_threadpool(remove_tree, workdir)
            raise
        return _accepted(audit_id)
    if ctype == "application/json" or ctype.endswith("+json"):
        body = await _json_body(request)
        kind, path = (
            ("manifest", body.manifest) if body.manifest is not None else ("folder", body.folder)
        )
        assert path is not None
        resolved = resolve_under_roots(path, settings.source_roots, what=kind)
        req = AuditRequest(
            corpora=body.corpus,
            name=body.name or resolved.name,
            thresholds=dict(body.thresholds or {}),
            labels=dict(body.labels or {}),
            label_names=normalise_label_names(body.label_names or {}),
            allow_empty=body.allow_empty,
            image_column=body.image_column,
            key_column=body.key_column,
        )
        audit_id = await run_in_threadpool(
            audit_from_paths, ws, path=resolved, kind=kind, request=req, roots=settings.source_roots
        )
        return _accepted(audit_id)
    raise HTTPException(
        status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
        f"unsupported content type {ctype or '(none)'!r}: send multipart/form-data with the split "
        "archive, or application/json naming a manifest or folder on the server",
    )


@router.get("", response_model=Page[AuditOut], response_model_exclude_unset=True)
def audit_list(
    session: SessionDep,
    _caller: ReaderDep,
    status_filter: Annotated[str | None, Query(alias="status")] = None,
    page: PageQuery = 1,
    page_size: PageSizeQuery = 50,
) -> dict[str, Any]:
    """Audits, newest first, with status, progress and summary."""
    items, total = list_audits(session, status=status_filter, page=page, page_size=page_size)
    return {"items": items, "total": total, "page": page, "page_size": page_size}


@router.get("/{audit_id}", response_model=AuditOut, response_model_exclude_unset=True)
def audit_get(audit_id: IdPath, session: SessionDep, _caller: ReaderDep) -> dict[str, Any]:
    """Status (queued, running, done, failed), progress, summary and error of one audit."""
    return get_audit(session, audit_id=audit_id)


@router.get(
    "/{audit_id}/report",
    response_model=Report,
    responses={
        200: {
            "description": "The report: JSON (``splitaudit.report/v1``) or the requested format",
            "content": {t: {} for f, t in REPORT_MEDIA_TYPES.items() if f != "json"},
        }
    },
)
def audit_report_get(
    audit_id: IdPath,
    session: SessionDep,
    _caller: ReaderDep,
    fmt: Annotated[str, Query(alias="format", pattern="^(json|csv|junit|md|html)$")] = "json",
) -> Response:
    """The report of a finished audit as JSON, CSV, JUnit XML, Markdown or one self-contained HTML
    page with the flagged pairs' thumbnails inline (409 while it runs)."""
    from splitaudit.indexer.reporting.formats import render
    from splitaudit.indexer.reporting.report import build_report

    require_done(session, audit_id=audit_id)
    report = build_report(session, audit_id)
    if fmt == "json":
        return JSONResponse(report.to_json())
    if fmt == "html":
        from splitaudit.indexer.reporting.html_report import html_page
        from splitaudit.indexer.reporting.html_thumbs import db_thumbnail_fetcher

        text = html_page(report, db_thumbnail_fetcher(session))
    else:
        text = render(report, fmt)
    headers = {"Content-Disposition": f'inline; filename="audit-{audit_id}.{REPORT_SUFFIX[fmt]}"'}
    if fmt == "html":
        from splitaudit.indexer.reporting.html_report import PAGE_CSP

        # The page's own policy (inline styles, data: images, nothing else), not the app's.
        headers["Content-Security-Policy"] = f"{PAGE_CSP}; frame-ancestors 'none'"
    return Response(text, media_type=REPORT_MEDIA_TYPES[fmt], headers=headers)


@router.get("/{audit_id}/matches", response_model=Page[MatchOut], response_model_exclude_unset=True)
def audit_matches(
    audit_id: IdPath,
    session: SessionDep,
    _caller: ReaderDep,
    filters: Annotated[MatchFilters, Depends()],
    page: PageQuery = 1,
    page_size: PageSizeQuery = 50,
) -> dict[str, Any]:
    """One page of an audit's matches, filtered by kind, review state or verdict, and test label."""
    items, total = list_matches(
        session, audit_id=audit_id, **filters.query(), page=page, page_size=page_size
    )
    return {"items": items, "total": total, "page": page, "page_size": page_size}
