"""A dedup run's results as a report (``splitaudit.dedup/v1``), cluster files and drop lists."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.csv_cells import csv_text
from splitaudit.indexer.db.models import Corpus, DedupMember, DedupRun, Item, Job, Shard
from splitaudit.indexer.dedup.reviews import member_verdicts
from splitaudit.indexer.errors import NotFoundError, UsageError
from splitaudit.indexer.kinds import KIND_RANK
from splitaudit.indexer.output_files import write_table, write_text
from splitaudit.indexer.timefmt import iso

SCHEMA = "splitaudit.dedup/v1"
MEMBER_COLUMNS = (
    "cluster",
    "semantic",
    "item_id",
    "key",
    "uri",
    "url",
    "shard",
    "width",
    "height",
    "kept",
    "tier",
    "partner_key",
    "hamming",
    "cosine",
    "verify",
    "review",
)
CLUSTER_FORMATS = (".json", ".csv", ".parquet")
DROP_FORMATS = (".txt", ".csv", ".parquet")


def run_status(session: Session, run: DedupRun) -> dict[str, Any]:
    """Status, progress and message of a run (from its job when it has one)."""
    job = session.get(Job, run.job_id) if run.job_id else None
    status = run.status if job is None or run.status in ("done", "failed") else job.status
    return {
        "status": status,
        "progress": 1.0 if run.status == "done" else (round(job.progress, 4) if job else 0.0),
        "message": job.message if job else None,
        "error": run.error or (job.error if job else None),
    }


def run_header(session: Session, run_id: int) -> dict[str, Any]:
    """Everything about a run except its clusters."""
    run = session.get(DedupRun, run_id)
    if run is None:
        raise NotFoundError(f"dedup run {run_id} does not exist")
    corpus = session.get_one(Corpus, run.corpus_id)
    return {
        "schema": SCHEMA,
        "dedup_id": run.id,
        "corpus": corpus.name,
        **run_status(session, run),
        "keep": run.params.get("keep"),
        "semantic": bool(run.params.get("semantic")),
        "thresholds": run.thresholds,
        "generation": run.generation,
        "code_version": run.code_version,
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
        "summary": run.summary,
    }


def clusters_page(
    session: Session,
    run_id: int,
    *,
    semantic: bool = False,
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Clusters ``offset`` .. ``offset + limit`` of a run (ordered by id) and the total count."""
    run = session.get(DedupRun, run_id)
    if run is None:
        raise NotFoundError(f"dedup run {run_id} does not exist")
    where = (DedupMember.run_id == run_id, DedupMember.semantic.is_(semantic))
    total = int(
        session.scalar(select(func.count(func.distinct(DedupMember.cluster))).where(*where)) or 0
    )
    ids_q = (
        select(DedupMember.cluster)
        .where(*where)
        .distinct()
        .order_by(DedupMember.cluster)
        .offset(offset)
    )
    cluster_ids = list(session.scalars(ids_q.limit(limit) if limit is not None else ids_q))
    if not cluster_ids:
        return [], total
    rows = session.execute(
        select(DedupMember, Item, Shard.name)
        .join(Item, DedupMember.item_id == Item.id)
        .outerjoin(Shard, Item.shard_id == Shard.id)
        .where(*where, DedupMember.cluster.in_(cluster_ids))
        .order_by(DedupMember.cluster, DedupMember.kept.desc(), Item.key)
    ).all()
    keys = {m.item_id: item.key for m, item, _ in rows}
    verdicts = member_verdicts(session, run.corpus_id, list(keys)) if not semantic else {}
    out: dict[int, dict[str, Any]] = {}
    for m, item, shard in rows:
        c = out.setdefault(m.cluster, {"id": m.cluster, "semantic": semantic, "members": []})
        c["members"].append(
            {
                "item_id": item.id,
                "key": item.key,
                "uri": item.uri,
                "url": item.url,
                "shard": shard,
                "width": item.width,
                "height": item.height,
                "kept": m.kept,
                "tier": m.tier,
                "partner_key": keys.get(m.partner_id or -1),
                "hamming": m.hamming,
                "cosine": _r(m.cosine),
                "verify": _r(m.verify),
                "review": verdicts.get(item.id),
            }
        )
    for c in out.values():
        c["size"] = len(c["members"])
        c["tier"] = max(
            (mm["tier"] for mm in c["members"]), key=lambda t: KIND_RANK.get(t, len(KIND_RANK))
        )
        c["kept"] = next(mm["key"] for mm in c["members"] if mm["kept"])
    return [out[i] for i in cluster_ids if i in out], total


def dedup_report(session: Session, run_id: int) -> dict[str, Any]:
    """The full report: header, every cluster, and the semantic clusters when the run asked for them."""
    out = run_header(session, run_id)
    out["clusters"], _ = clusters_page(session, run_id)
    if out["semantic"]:
        out["semantic_clusters"], _ = clusters_page(session, run_id, semantic=True)
    return out


def drop_rows(session: Session, run_id: int) -> list[tuple[str, str | None]]:
    """``(key, url)`` of every non-kept member of a (non-semantic) cluster, in cluster order."""
    return [
        (str(k), u)
        for k, u in session.execute(
            select(Item.key, Item.url)
            .join(DedupMember, DedupMember.item_id == Item.id)
            .where(
                DedupMember.run_id == run_id,
                DedupMember.semantic.is_(False),
                DedupMember.kept.is_(False),
            )
            .order_by(DedupMember.cluster, Item.key)
        )
    ]


def member_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat row per cluster member (clusters, then semantic clusters)."""
    return [
        {"cluster": c["id"], "semantic": c["semantic"], **m}
        for c in list(report.get("clusters", [])) + list(report.get("semantic_clusters", []))
        for m in c["members"]
    ]


def render_json(report: Mapping[str, Any]) -> str:
    """The report as indented JSON."""
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


def render_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """Rows as CSV with a header (text cells neutralised against formula injection: ``csv_safe``)."""
    return csv_text(rows, columns)


def write_clusters(path: Path, report: Mapping[str, Any]) -> None:
    """Clusters as ``.json`` (the whole report), ``.csv`` or ``.parquet`` (one row per member)."""
    suffix = _suffix(path, CLUSTER_FORMATS, "--json/--csv/--parquet")
    if suffix == ".json":
        write_text(path, render_json(report))
    else:
        write_table(path, member_rows(report), MEMBER_COLUMNS)


def write_drop_list(path: Path, rows: Sequence[tuple[str, str | None]]) -> None:
    """The drop list: ``.txt`` one key per line, or ``.csv`` / ``.parquet`` with ``key``, ``url``."""
    suffix = _suffix(path, DROP_FORMATS, "--drop-list")
    if suffix == ".txt":
        write_text(path, "".join(f"{k}\n" for k, _ in rows))
    else:
        write_table(path, [{"key": k, "url": u} for k, u in rows], ("key", "url"))


def _suffix(path: Path, allowed: Sequence[str], option: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in allowed:
        raise UsageError(f"{option} {path}: use a file ending in {', '.join(allowed)}")
    return suffix


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)
