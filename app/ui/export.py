"""Exports of an audit's review: every pair with its current verdict (CSV / JSON), and a gate baseline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.csv_cells import csv_lines
from splitaudit.indexer.db.models import Audit, Item, Match, Review, SplitItem
from splitaudit.indexer.errors import NotFoundError
from splitaudit.indexer.gate.baseline import Baseline, entry_from_match
from splitaudit.indexer.reporting.models import ReportItem, ReportMatch
from splitaudit.indexer.timefmt import iso

REVIEW_COLUMNS = (
    "match_id",
    "kind",
    "test_key",
    "test_label",
    "test_sha256",
    "corpus",
    "corpus_key",
    "corpus_url",
    "cosine",
    "hamming",
    "score",
    "verdict",
    "note",
    "reviewer",
    "reviewed_at",
)
CHUNK = 1000


def review_rows(session: Session, *, audit_id: int) -> Iterator[dict[str, Any]]:
    """Every match of an audit with the test item, corpus item and current review (streamed, by id)."""
    if session.get(Audit, audit_id) is None:
        raise NotFoundError(f"audit {audit_id} does not exist; list audits at /ui")
    latest = (
        select(Review.match_id.label("match_id"), func.max(Review.id).label("review_id"))
        .group_by(Review.match_id)
        .subquery("latest_review")
    )
    # Plain columns, not ORM entities: an export streams every pair and entity loading costs ~30x more.
    query = (
        select(
            Match.id,
            Match.kind,
            SplitItem.key,
            SplitItem.label,
            SplitItem.sha256,
            SplitItem.pixel_digest,
            Match.corpus,
            Item.key,
            Item.url,
            Item.sha256,
            Match.cosine,
            Match.hamming,
            Match.score,
            Review.verdict,
            Review.note,
            Review.reviewer,
            Review.created_at,
        )
        .join(SplitItem, SplitItem.id == Match.split_item_id)
        .outerjoin(Item, Item.id == Match.item_id)
        .outerjoin(latest, latest.c.match_id == Match.id)
        .outerjoin(Review, Review.id == latest.c.review_id)
        .where(Match.audit_id == audit_id)
        .order_by(Match.id)
        .execution_options(yield_per=CHUNK)
    )
    for row in session.execute(query):
        (
            match_id,
            kind,
            test_key,
            test_label,
            test_sha,
            test_pixel,
            corpus,
            corpus_key,
            corpus_url,
            corpus_sha,
            cosine,
            hamming,
            score,
            verdict,
            note,
            reviewer,
            reviewed_at,
        ) = row
        yield {
            "match_id": match_id,
            "kind": kind,
            "test_key": test_key,
            "test_label": test_label,
            "test_sha256": test_sha,
            "test_pixel_digest": test_pixel,
            "corpus": corpus,
            "corpus_key": corpus_key,
            "corpus_url": corpus_url,
            "corpus_sha256": corpus_sha,
            "cosine": cosine,
            "hamming": hamming,
            "score": score,
            "verdict": verdict,
            "note": note,
            "reviewer": reviewer,
            "reviewed_at": iso(reviewed_at),
        }


def review_csv(rows: Iterator[dict[str, Any]]) -> Iterator[str]:
    """The rows as CSV text chunks (header first), columns ``REVIEW_COLUMNS``; formula-safe cells."""
    return csv_lines(rows, REVIEW_COLUMNS, chunk=CHUNK)


def review_json(audit_id: int, rows: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """The review as one JSON document."""
    pairs = list(rows)
    counts: dict[str, int] = {}
    for row in pairs:
        key = row["verdict"] or "unreviewed"
        counts[key] = counts.get(key, 0) + 1
    return {
        "schema": "splitaudit.review/v1",
        "audit_id": audit_id,
        "counts": counts,
        "pairs": pairs,
    }


def review_baseline(audit_id: int, rows: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """A ``splitaudit.baseline/v1`` document of every pair judged ``not_duplicate`` (what the gate honours)."""
    entries, seen = [], set()
    for row in rows:
        if row["verdict"] != "not_duplicate" or not (
            row["test_sha256"] or row["test_pixel_digest"]
        ):
            continue
        item = ReportItem(
            key=row["test_key"], sha256=row["test_sha256"], pixel_digest=row["test_pixel_digest"]
        )
        match = ReportMatch(
            corpus=row["corpus"],
            corpus_key=row["corpus_key"],
            kind=row["kind"],
            sha256=row["corpus_sha256"],  # a match's sha256 is its corpus item's
        )
        entry = entry_from_match(item, match, note=row["note"])
        if entry not in seen:
            seen.add(entry)
            entries.append(entry)
    return Baseline(entries=tuple(entries)).to_dict(
        origin={"audit_id": audit_id, "from": "review export"}
    )
