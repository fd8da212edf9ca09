"""Acting on an audit: its corpus blocklist and its clean split, under the gate's failing tiers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from splitaudit.app.audits import require_done
from splitaudit.app.deps import ReaderDep, SessionDep
from splitaudit.app.params import IdPath
from splitaudit.app.responses import CsvResponse, TextResponse, also

router = APIRouter(prefix="/audits", tags=["audits"])
FailOn = Annotated[
    str, Query(description="Comma-separated failing tiers (exact,near,semantic,label_leak or all)")
]


@router.get("/{audit_id}/blocklist", response_class=CsvResponse, responses=also("text/plain"))
def audit_blocklist(
    audit_id: IdPath,
    session: SessionDep,
    _caller: ReaderDep,
    fail_on: FailOn = "exact,near",
    fmt: Annotated[str, Query(alias="format", pattern="^(txt|csv)$")] = "csv",
) -> Response:
    """Corpus items matched at the failing tiers (reviewed ``not_duplicate`` excluded, ``duplicate`` always in)."""
    from splitaudit.indexer.dedup.outputs import render_csv
    from splitaudit.indexer.gate.decontaminate import BLOCKLIST_COLUMNS, blocklist_rows
    from splitaudit.indexer.gate.policy import parse_tiers
    from splitaudit.indexer.reporting.report import audit_report

    tiers = parse_tiers(fail_on)
    require_done(session, audit_id=audit_id)
    rows = blocklist_rows(audit_report(session, audit_id), tiers)
    if fmt == "txt":
        return _text("".join(f"{r['corpus']}/{r['key']}\n" for r in rows))
    return _csv(render_csv(rows, BLOCKLIST_COLUMNS), f"audit-{audit_id}-blocklist.csv")


@router.get("/{audit_id}/clean-split", response_class=TextResponse, responses=also("text/csv"))
def audit_clean_split(
    audit_id: IdPath,
    session: SessionDep,
    _caller: ReaderDep,
    fail_on: FailOn = "exact,near",
    fmt: Annotated[str, Query(alias="format", pattern="^(txt|csv)$")] = "txt",
) -> Response:
    """Test items with no counted match at the failing tiers: keys, or CSV ``key,path,label``."""
    from splitaudit.indexer.dedup.outputs import render_csv
    from splitaudit.indexer.gate.decontaminate import CLEAN_COLUMNS, clean_split_rows, render_keys
    from splitaudit.indexer.gate.policy import parse_tiers
    from splitaudit.indexer.reporting.report import audit_report

    tiers = parse_tiers(fail_on)
    require_done(session, audit_id=audit_id)
    rows = clean_split_rows(audit_report(session, audit_id), tiers)
    if fmt == "txt":
        return _text(render_keys(rows))
    return _csv(render_csv(rows, CLEAN_COLUMNS), f"audit-{audit_id}-clean.csv")


def _text(body: str) -> Response:
    return Response(body, media_type="text/plain; charset=utf-8")


def _csv(body: str, filename: str) -> Response:
    """A CSV body shown inline, saved as ``filename``."""
    return Response(
        body,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'inline; filename="{filename}"'},
    )
