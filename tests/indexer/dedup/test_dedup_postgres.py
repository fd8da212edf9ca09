"""Dedup on the machine's PostgreSQL gives the clusters it gives on SQLite (skips when none answers).

Dedup reads and writes its bulk rows on the DB-API cursor (``dedup.db_rows``): the values come
back untyped there (a parsed JSON locator, real booleans), so both databases are run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.planted_dedup import plant
from sqlalchemy import select

from splitaudit.indexer.db.models import DedupEdge, DedupMember
from splitaudit.indexer.dedup.outputs import dedup_report
from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def _dedup(ws: Workspace, corpus: Path) -> tuple[list[tuple], set[frozenset[str]], dict]:
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    run_id = create_dedup(ws, corpus="c")
    run_dedup(ws, run_id)
    with ws.sessions() as s:
        keys = {m.item_id: m for m in s.scalars(select(DedupMember))}
        members = sorted((m.cluster, m.semantic, m.kept, m.tier, m.hamming) for m in keys.values())
        edges = len(s.scalars(select(DedupEdge.id)).all())
        report = dedup_report(s, run_id)
    clusters = {frozenset(m["key"] for m in c["members"]) for c in report["clusters"]}
    return [*members, ("edges", edges)], clusters, report["summary"]


@pytest.mark.postgres
def test_dedup_on_postgres_equals_sqlite(tmp_path: Path, pg_url: str) -> None:
    truth = plant(tmp_path / "corpus")
    on_sqlite = _dedup(Workspace.open(tmp_path / "lite"), tmp_path / "corpus")
    ws = Workspace.open(tmp_path / "pg", pg_url)
    try:
        on_pg = _dedup(ws, tmp_path / "corpus")
    finally:
        ws.close()
    assert on_pg == on_sqlite
    assert on_pg[1] == {frozenset(keys) for keys in truth.values()}
    kept = [m for m in on_pg[0][:-1] if m[2]]
    assert len(kept) == len(truth)  # one kept member per cluster, booleans read back
