"""The ``splitaudit.report/v1`` report and its summary, built from the DB rows of an audit."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import (
    Audit,
    Item,
    Job,
    Match,
    Review,
    Shard,
    Split,
    SplitItem,
)
from splitaudit.indexer.db.models import SplitDuplicate as SplitDuplicateRow
from splitaudit.indexer.db.queries import in_chunks
from splitaudit.indexer.kinds import KIND_RANK, MATCH_KINDS, PIXEL_KINDS, JobStatus
from splitaudit.indexer.reporting.models import (
    SCHEMA,
    FailedItem,
    Report,
    ReportItem,
    ReportMatch,
    SplitDuplicate,
    SplitRef,
    Summary,
    as_report,
)
from splitaudit.indexer.timefmt import iso

KINDS = MATCH_KINDS  # old names, kept for importers
VISUAL_KINDS = PIXEL_KINDS


_DIGITS = re.compile(r"(\d+)")


def natural_key(key: str) -> tuple[str | int, ...]:
    """Sort key reading digit runs as numbers (``a#2`` before ``a#10``)."""
    return tuple(int(part) if n % 2 else part for n, part in enumerate(_DIGITS.split(key)))


def _item_kinds(session: Session, audit_id: int) -> dict[int, set[str]]:
    kinds: dict[int, set[str]] = defaultdict(set)
    for sid, kind in session.execute(
        select(Match.split_item_id, Match.kind).where(Match.audit_id == audit_id).distinct()
    ):
        kinds[int(sid)].add(kind)
    return kinds


def verdict_of(kinds: set[str]) -> str:
    """The strongest kind among ``kinds`` (exact > near > semantic > label_leak), or ``clean``."""
    return min(kinds, key=KIND_RANK.__getitem__) if kinds else "clean"


def compute_summary(session: Session, audit_id: int) -> dict[str, Any]:
    """Counts of test *images* (not pairs) per kind, rates, and a per-label breakdown."""
    audit = session.get_one(Audit, audit_id)
    kinds = _item_kinds(session, audit_id)
    rows = session.execute(
        select(SplitItem.id, SplitItem.label, SplitItem.error).where(
            SplitItem.split_id == audit.split_id
        )
    ).all()
    total = len(rows)
    failed = sum(1 for r in rows if r.error)
    readable = total - failed
    by_kind: dict[str, int] = dict.fromkeys(KINDS, 0)
    by_label: dict[str, dict[str, Any]] = {}
    flagged = contaminated = 0
    for item_id, label, error in rows:
        ks = kinds.get(int(item_id), set())
        for k in ks:
            by_kind[k] += 1
        flagged += bool(ks)
        contaminated += bool(ks & set(VISUAL_KINDS))
        if label is not None and not error:
            entry = by_label.setdefault(
                label, {"items": 0, "flagged": 0, "by_kind": {k: 0 for k in KINDS}}
            )
            entry["items"] += 1
            entry["flagged"] += bool(ks)
            for k in ks:
                entry["by_kind"][k] += 1
    for entry in by_label.values():
        entry["rate"] = round(entry["flagged"] / entry["items"], 6) if entry["items"] else 0.0
    dup_count = (
        session.scalar(
            select(func.count(SplitDuplicateRow.id)).where(SplitDuplicateRow.audit_id == audit_id)
        )
        or 0
    )
    return {
        "items": total,
        "readable": readable,
        "failed": failed,
        "flagged": flagged,
        "flagged_rate": round(flagged / readable, 6) if readable else 0.0,
        "contaminated": contaminated,
        "contaminated_rate": round(contaminated / readable, 6) if readable else 0.0,
        "by_kind": by_kind,
        "by_label": dict(sorted(by_label.items())),
        "split_duplicates": dup_count,
    }


def latest_review_ids() -> Any:
    """Subquery ``(match_id, review_id)`` of each reviewed match's current (newest) review."""
    return (
        select(Review.match_id.label("match_id"), func.max(Review.id).label("review_id"))
        .group_by(Review.match_id)
        .subquery("latest_review")
    )


def latest_reviews(session: Session, match_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The current (newest) review of each match that has one."""
    out: dict[int, dict[str, Any]] = {}
    for chunk in in_chunks(match_ids):
        newest = (
            select(func.max(Review.id)).where(Review.match_id.in_(chunk)).group_by(Review.match_id)
        ).scalar_subquery()
        for r in session.scalars(select(Review).where(Review.id.in_(newest))):
            out[r.match_id] = review_dict(r)
    return out


def inherited_reviews(
    session: Session, wanted: list[tuple[int, str | None, str | None, int]]
) -> dict[int, dict[str, Any]]:
    """Reviews carried over from earlier audits: same test content (sha256 or pixel digest) x same corpus item.

    ``wanted`` holds ``(match_id, test sha256, test pixel digest, corpus item id)`` for matches
    without a review of their own; the newest earlier verdict on the same pair applies.
    """
    out: dict[int, dict[str, Any]] = {}
    item_ids = sorted({w[3] for w in wanted})
    newest: dict[tuple[int, str], tuple[Review, int]] = {}
    for chunk in in_chunks(item_ids):
        rows = session.execute(
            select(Review, Match.id, Match.item_id, SplitItem.sha256, SplitItem.pixel_digest)
            .join(Match, Review.match_id == Match.id)
            .join(SplitItem, Match.split_item_id == SplitItem.id)
            .where(Match.item_id.in_(chunk))
            .order_by(Review.id)
        ).all()
        for review, match_id, item_id, sha, pixel in rows:
            for digest in (sha, pixel):
                if digest and item_id is not None:
                    newest[(int(item_id), digest)] = (review, int(match_id))
    for match_id, sha, pixel, item_id in wanted:
        found = [newest[k] for k in ((item_id, sha or ""), (item_id, pixel or "")) if k in newest]
        if found:
            review, source = max(found, key=lambda rm: rm[0].id)
            out[match_id] = dict(review_dict(review), inherited_from_match=source)
    return out


def review_dict(r: Review) -> dict[str, Any]:
    """A review row as JSON."""
    return {"verdict": r.verdict, "note": r.note, "reviewer": r.reviewer, "at": iso(r.created_at)}


def audit_status(session: Session, audit: Audit) -> dict[str, Any]:
    """Status, progress, message and error of an audit, from its job."""
    job = session.get(Job, audit.job_id) if audit.job_id else None
    if job is None:
        return {
            "status": JobStatus.DONE if audit.finished_at else JobStatus.QUEUED,
            "progress": 1.0 if audit.finished_at else 0.0,
            "message": None,
            "error": None,
        }
    return {
        "status": job.status,
        "progress": round(job.progress, 4),
        "message": job.message,
        "error": job.error,
    }


def build_report(session: Session, audit_id: int) -> Report:
    """The ``splitaudit.report/v1`` report of an audit, built once from its DB rows."""
    audit = session.get_one(Audit, audit_id)
    split = session.get_one(Split, audit.split_id)
    # natural order: FILE#2 before FILE#10, img9 before img10
    items = sorted(
        session.execute(select(SplitItem).where(SplitItem.split_id == split.id)).scalars(),
        key=lambda it: natural_key(it.key),
    )
    matches = session.execute(
        select(Match, Item, Shard.name)
        .outerjoin(Item, Match.item_id == Item.id)
        .outerjoin(Shard, Item.shard_id == Shard.id)
        .where(Match.audit_id == audit_id)
    ).all()
    reviews = latest_reviews(session, [m.id for m, _i, _s in matches])
    digests = {it.id: (it.sha256, it.pixel_digest) for it in items}
    reviews.update(
        inherited_reviews(
            session,
            [
                (m.id, *digests.get(m.split_item_id, (None, None)), m.item_id)
                for m, _i, _s in matches
                if m.id not in reviews and m.item_id is not None
            ],
        )
    )
    per_item: dict[int, list[ReportMatch]] = defaultdict(list)
    for m, item, shard_name in matches:
        per_item[m.split_item_id].append(match_model(m, item, shard_name, reviews.get(m.id)))
    out_items: list[ReportItem] = []
    failed: list[FailedItem] = []
    for it in items:
        if it.error:
            failed.append(FailedItem(key=it.key, reason=it.error, split_item_id=it.id))
            continue
        ms = sorted(per_item.get(it.id, []), key=lambda d: (KIND_RANK[d.kind], -(d.score or 0.0)))
        out_items.append(
            ReportItem(
                split_item_id=it.id,
                key=it.key,
                label=it.label,
                sha256=it.sha256,
                pixel_digest=it.pixel_digest,
                verdict=verdict_of({d.kind for d in ms}),  # type: ignore[arg-type]  # a kind or clean
                matches=ms,
                match_count=len(ms),
            )
        )
    keys = {it.id: it.key for it in items}
    dups = [
        SplitDuplicate(
            a=keys.get(d.a_id), b=keys.get(d.b_id), kind=d.kind, cosine=d.cosine, hamming=d.hamming
        )
        for d in session.scalars(
            select(SplitDuplicateRow).where(SplitDuplicateRow.audit_id == audit_id)
        )
    ]
    status = audit_status(session, audit)
    return Report(
        schema=SCHEMA,
        audit_id=audit.id,
        status=status["status"],
        split=SplitRef(id=split.id, name=split.name),
        corpora=list(audit.corpora),
        created_at=iso(audit.created_at),
        finished_at=iso(audit.finished_at),
        summary=Summary.model_validate(audit.summary or compute_summary(session, audit_id)),
        thresholds=audit.thresholds,
        model=audit.model,
        index=audit.index_info,
        code_version=audit.code_version,
        params=audit.params,
        items=out_items,
        failed=failed,
        split_duplicates=dups,
    )


def audit_report(session: Session, audit_id: int) -> dict[str, Any]:
    """The report of an audit as its JSON dict (``build_report(...).to_json()``)."""
    return build_report(session, audit_id).to_json()


def match_model(
    m: Match, item: Item | None, shard_name: str | None, review: dict[str, Any] | None
) -> ReportMatch:
    """One match with the corpus item's provenance (keys left out when there is no corpus item)."""
    fields: dict[str, Any] = {
        "id": m.id,
        "kind": m.kind,
        "corpus": m.corpus,
        "cosine": _r(m.cosine),
        "hamming": m.hamming,
        "score": _r(m.score),
        "evidence": m.evidence or {},
        "review": review,
        "corpus_item_id": m.item_id,
        "corpus_key": None,
        "uri": None,
    }
    if item is not None:
        fields.update(
            corpus_key=item.key,
            uri=item.uri,
            url=item.url,
            caption=item.caption,
            label=item.label,
            license=item.license,
            shard=shard_name,
            sha256=item.sha256,
            pixel_digest=item.pixel_digest,
        )
    return ReportMatch.model_validate(fields)


def match_dict(
    m: Match, item: Item | None, shard_name: str | None, review: dict[str, Any] | None
) -> dict[str, Any]:
    """One match with the corpus item's provenance, as JSON."""
    return match_model(m, item, shard_name, review).to_json()


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def semantic_status(report: Report | Mapping[str, Any]) -> tuple[str, str | None]:
    """``(status, reason)`` of the semantic tier: ``ok``, ``partial`` (some corpora) or ``skipped``."""
    report = as_report(report)
    semantic = (report.summary.model_extra or {}).get("semantic")
    if isinstance(semantic, Mapping):
        return str(semantic.get("status") or "ok"), semantic.get("reason")
    model = report.model or {}
    if isinstance(model.get("semantic"), str):
        return model["semantic"], model.get("reason")
    return "ok", None
