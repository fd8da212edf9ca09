"""On PostgreSQL the corpus lock is a session advisory lock: a second run (another host, or
another home on the same database) is refused while the first holds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import photo

from splitaudit.indexer.pipeline.corpus_lock import CorpusBusyError, corpus_index_lock
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace

pytestmark = pytest.mark.postgres


def test_a_second_home_on_one_postgres_database_waits_for_the_corpus(
    tmp_path: Path, pg_url: str
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    photo(1, (64, 48)).save(folder / "1.png")
    first = Workspace.open(tmp_path / "host-a", pg_url)
    second = Workspace.open(tmp_path / "host-b", pg_url)
    try:
        with corpus_index_lock(first, "c"), pytest.raises(CorpusBusyError, match="PostgreSQL"):
            index_sources(second, "c", [FolderSource(folder)], embedder=None)
        assert index_sources(second, "c", [FolderSource(folder)], embedder=None).indexed == 1
    finally:
        first.close()
        second.close()
