"""The same indexing + audit path against the machine's PostgreSQL (skips when none answers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import photo

from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
from splitaudit.indexer.pipeline.index import index_sources, open_corpus_index
from splitaudit.indexer.reporting.report import audit_report
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.open import open_split
from splitaudit.indexer.workspace import Workspace


@pytest.mark.postgres
def test_index_rerun_and_audit_on_postgres(tmp_path: Path, pg_url: str) -> None:
    corpus = tmp_path / "corpus" / "a"
    corpus.mkdir(parents=True)
    for i in range(6):
        photo(i, (96, 72)).save(corpus / f"{i}.jpg", quality=90)
    ws = Workspace.open(tmp_path / "home", pg_url)
    try:
        first = index_sources(ws, "pg", [FolderSource(corpus.parent)], embedder=None, batch_size=4)
        again = index_sources(ws, "pg", [FolderSource(corpus.parent)], embedder=None)
        assert (first.indexed, again.indexed, again.skipped) == (6, 0, 6)
        index = open_corpus_index(ws, "pg")
        assert index.hashes.count == 6
        # 96x72 thumbnails keep shape descriptors: PostgreSQL's bytea reads back as stored
        assert index.shapes is not None and index.shapes.count == 6
        assert index.shapes.vectors.any()
        split = tmp_path / "split"
        split.mkdir()
        (split / "dup.jpg").write_bytes((corpus / "3.jpg").read_bytes())
        split_id = create_split(ws, open_split(str(split)), name="s")
        audit_id = create_audit(ws, split_id=split_id, corpora=["pg"])
        run_audit(ws, audit_id)
        with ws.sessions() as s:
            report = audit_report(s, audit_id)
        assert report["items"][0]["verdict"] == "exact"
        assert report["items"][0]["matches"][0]["corpus_key"] == "a/3.jpg"
    finally:
        ws.close()
