"""On PostgreSQL, two runners of one audit at the same time (a lost lease) store it once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import func, select

from splitaudit.indexer.audit.service import execute_audit, submit_audit
from splitaudit.indexer.db.models import Match, SplitItem
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace

pytestmark = pytest.mark.postgres


def test_two_concurrent_runs_of_one_audit_store_it_once(tmp_path: Path, pg_url: str) -> None:
    corpus, split = tmp_path / "corpus", tmp_path / "split"
    corpus.mkdir()
    split.mkdir()
    for i in range(3):
        photo(i, (96, 64)).save(corpus / f"c{i}.png")
    for i in range(6):
        photo(i if i < 2 else 70 + i, (96, 64)).save(split / f"t{i}.png")
    ws = Workspace.open(tmp_path / "home", pg_url)
    try:
        index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
        audit_id = submit_audit(ws, split_uri=str(split), name="s", corpora=["c"], local=False)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                execute_audit(ws, audit_id)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        with ws.sessions() as s:
            matches = s.scalar(select(func.count(Match.id)).where(Match.audit_id == audit_id))
            items = s.scalar(select(func.count(SplitItem.id)))
        assert (matches, items) == (2, 6)
    finally:
        ws.close()
