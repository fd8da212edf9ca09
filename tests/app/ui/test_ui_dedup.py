"""Dedup UI pages (server side): the runs list and a run's clusters with thumbnails, kept member, reviews."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.app_home import app_client, new_home
from helpers.planted_dedup import plant

from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def test_dedup_pages_show_clusters_kept_members_and_review_buttons(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    truth = plant(tmp_path / "corpus")
    ws = Workspace.open(home, migrate=False)
    try:
        index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=None)
        run_id = create_dedup(ws, corpus="c", keep="first")
        queued = create_dedup(ws, corpus="c")
        run_dedup(ws, run_id)
    finally:
        ws.close()
    with app_client(home) as client:
        corpus = client.get("/ui/corpora/c")
        assert 'href="/ui/corpora/c/dedup"' in corpus.text
        runs = client.get("/ui/corpora/c/dedup")
        assert runs.status_code == 200 and f'href="/ui/dedup/{run_id}"' in runs.text
        page = client.get(f"/ui/dedup/{run_id}")
        assert page.status_code == 200
        html = page.text
        assert len(re.findall(r'<section class="cluster"', html)) == len(truth)
        kept = re.findall(r'<li class="member kept" data-item="(\d+)"', html)
        assert len(kept) == len(truth)
        for item_id in kept:
            assert f"/api/v1/items/{item_id}/thumbnail" in html
        assert html.count('data-dedup-verdict="not_duplicate"') == sum(
            len(v) for v in truth.values()
        )
        assert "dedup.js" in html and client.get("/ui/static/dedup.js").status_code == 200
        waiting = client.get(f"/ui/dedup/{queued}")
        assert waiting.status_code == 200 and 'id="dedup-status"' in waiting.text
        assert client.get("/ui/dedup/9999").status_code == 404
