"""The dedup clusters page in a real browser: thumbnails load, a member is marked not a duplicate."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.planted_dedup import plant
from ui_browser_support import browser_page, require_chromium, save_screenshot, serve, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_dedup_clusters_page_review_persists(tmp_path: Path) -> None:
    require_chromium()
    from splitaudit.indexer.dedup.service import create_dedup, run_dedup
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.folder import FolderSource
    from splitaudit.indexer.workspace import Workspace

    truth = plant(tmp_path / "corpus")
    ws = Workspace.open(tmp_path / "home")
    try:
        index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=None)
        run_id = create_dedup(ws, corpus="c")
        run_dedup(ws, run_id)
    finally:
        ws.close()
    with (
        serve(tmp_path / "home", tmp_path / "server.log", SPLITAUDIT_RUN_WORKER="false") as server,
        server.client() as api,
        browser_page() as page,
    ):
        page.goto(f"{server.url}/ui/dedup/{run_id}")
        assert page.locator("section.cluster").count() == len(truth)
        assert page.locator("li.member.kept").count() == len(truth)
        page.locator("li.member img.thumb").first.wait_for()
        wait_for_js(
            page,
            "Array.from(document.querySelectorAll('li.member img.thumb')).every(i => i.complete && i.naturalWidth > 0)",
        )
        clusters = api.get(f"/api/v1/dedup/{run_id}/clusters").json()["items"]
        flip = next(m for c in clusters for m in c["members"] if m["key"] == "copy1_flip.jpg")
        member = page.locator(f'li.member[data-item="{flip["item_id"]}"]')
        member.locator('[data-dedup-verdict="not_duplicate"]').click()
        member.locator(".badge.verdict-not_duplicate").wait_for()
        save_screenshot(page, "dedup-clusters.png")
        after = api.get(f"/api/v1/dedup/{run_id}/clusters").json()["items"]
        assert (
            next(m for c in after for m in c["members"] if m["key"] == "copy1_flip.jpg")["review"]
            == "not_duplicate"
        )
        page.reload()
        assert (
            page.locator(
                f'li.member[data-item="{flip["item_id"]}"] .badge.verdict-not_duplicate'
            ).count()
            == 1
        )
