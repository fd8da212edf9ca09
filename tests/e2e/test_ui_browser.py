"""The review UI in a real browser: Debian's headless Chromium driven by Playwright over a live server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ui_browser_support import (
    browser_page,
    build_demo_home,
    require_chromium,
    save_screenshot,
    serve,
    wait_for_js,
    zip_folder,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _chromium() -> None:
    require_chromium()


def _pair_position(server_matches: list[dict[str, object]], match_id: int) -> int:
    return next(i for i, m in enumerate(server_matches, 1) if m["id"] == match_id)


def test_review_pages_keyboard_verdicts_filters_and_screenshot(tmp_path: Path) -> None:
    demo = build_demo_home(tmp_path)
    aid = demo.audit_id
    # A corpus file moved away after indexing: its thumbnail must become a placeholder with hashes.
    moved = demo.data / "corpus" / "photos" / "cat.jpg"
    moved.rename(tmp_path / "moved.jpg")
    with (
        serve(demo.home, tmp_path / "server.log", SPLITAUDIT_RUN_WORKER="false") as server,
        server.client() as api,
        browser_page() as page,
    ):
        audit = api.get(f"/api/v1/audits/{aid}").json()
        everything = api.get(f"/api/v1/audits/{aid}/matches", params={"page_size": 500}).json()
        near_total = api.get(f"/api/v1/audits/{aid}/matches", params={"kind": "near"}).json()[
            "total"
        ]

        # Audits list: one done audit with the flagged counts per tier.
        page.goto(f"{server.url}/ui")
        row = page.locator(f'tr[data-audit-id="{aid}"]')
        assert row.locator('[data-field="status"]').inner_text() == "done"
        for kind, n in audit["summary"]["by_kind"].items():
            assert row.locator(f'td[data-kind="{kind}"]').inner_text() == str(n)

        # Summary: counts, the per-label chart and both histograms.
        row.locator("a").first.click()
        page.wait_for_url(f"**/ui/audits/{aid}")
        assert page.locator("#n-items").inner_text() == str(audit["summary"]["items"])
        assert page.locator('[data-kind-count="near"]').inner_text() == str(
            audit["summary"]["by_kind"]["near"]
        )
        assert page.locator("#label-chart rect.bar-fill").count() == len(
            audit["summary"]["by_label"]
        )
        assert page.locator("svg[data-hist] line[data-threshold]").count() == 5

        # Queue: a filter changes the list.
        page.goto(f"{server.url}/ui/audits/{aid}/matches")
        assert page.locator("#queue tbody tr").count() == everything["total"]
        page.select_option("#f-kind", "near")
        page.wait_for_url("**kind=near**")
        assert page.locator("#queue tbody tr").count() == near_total
        assert page.locator("#queue .badge.kind-near").count() == near_total

        # Queue keyboard: j selects the first pair, n records "not duplicate" on it.
        page.keyboard.press("j")
        first_id = int(page.locator("#queue tbody tr.selected").get_attribute("data-match-id") or 0)
        page.keyboard.press("n")
        page.locator(f'tr[data-match-id="{first_id}"] .badge.verdict-not_duplicate').wait_for()
        assert api.get(f"/api/v1/matches/{first_id}").json()["review"]["verdict"] == "not_duplicate"

        # Pair view: keyboard d marks a verdict that the REST API then returns, with who and when.
        page.goto(f"{server.url}/ui/audits/{aid}/review/1")
        match_id = int(page.locator("body").get_attribute("data-match-id") or 0)
        assert match_id == everything["items"][0]["id"]
        page.keyboard.press("e")
        page.keyboard.type("planted copy")
        page.keyboard.press("Escape")
        page.keyboard.press("d")
        page.locator("#current-verdict .badge.verdict-duplicate").wait_for()
        assert "anonymous" in page.locator("#current-verdict").inner_text()
        review = api.get(f"/api/v1/matches/{match_id}").json()["review"]
        assert (review["verdict"], review["note"], review["reviewer"]) == (
            "duplicate",
            "planted copy",
            "anonymous",
        )
        page.reload()
        assert page.locator('[data-verdict="duplicate"]').get_attribute("aria-pressed") == "true"

        # Compare modes and the help overlay.
        page.keyboard.press("o")
        assert page.locator("#stage").get_attribute("data-mode") == "overlay"
        page.keyboard.press("f")
        wait_for_js(page, "document.getElementById('stage').classList.contains('show-test')")
        wait_for_js(page, "!document.getElementById('stage').classList.contains('show-test')")
        page.keyboard.press("s")
        assert page.locator("#stage").get_attribute("data-mode") == "side"
        page.keyboard.press("?")
        assert page.locator("#help-dialog").is_visible()
        page.keyboard.press("Escape")
        assert not page.locator("#help-dialog").is_visible()

        # j moves to the next pair.
        page.keyboard.press("j")
        page.wait_for_url(f"**/ui/audits/{aid}/review/2")
        assert (
            int(page.locator("body").get_attribute("data-match-id") or 0)
            == everything["items"][1]["id"]
        )

        # The pair whose corpus file is gone shows a placeholder with the item's hash, not a broken image.
        gone = next(m for m in everything["items"] if m["corpus_key"] == "photos/cat.jpg")
        page.goto(
            f"{server.url}/ui/audits/{aid}/review/{_pair_position(everything['items'], gone['id'])}"
        )
        placeholder = page.locator(".pane-corpus .thumb-missing")
        placeholder.wait_for()
        assert gone["corpus_item"]["sha256"] in placeholder.inner_text()
        page.locator(".pane-corpus .thumb-missing .reason").filter(
            has_text="not available"
        ).wait_for()

        # A label-leak pair highlights the matched span of the evidence.
        leak = next(m for m in everything["items"] if m["kind"] == "label_leak")
        page.goto(f"{server.url}/ui/matches/{leak['id']}")
        marks = page.locator("#leak-evidence mark").all_inner_texts()
        assert leak["split_item"]["label"] in [m.lower() for m in marks]

        # Screenshot of the review page (look at it: test-artifacts/ui-review.png).
        page.goto(f"{server.url}/ui/audits/{aid}/review/2")
        page.locator(".pane-test img.thumb").evaluate("img => img.decode()")
        shot = save_screenshot(page, "ui-review.png")
        page.set_viewport_size({"width": 420, "height": 860})
        narrow = save_screenshot(page, "ui-review-narrow.png")
        verdict_box = page.locator(".verdicts").bounding_box()
        assert verdict_box is not None and verdict_box["width"] <= 420
    assert shot.stat().st_size > 10_000 and narrow.stat().st_size > 5_000


def test_upload_form_starts_an_audit_whose_progress_bar_updates(tmp_path: Path) -> None:
    demo = build_demo_home(tmp_path, audit=False)
    archive = zip_folder(demo.data / "split", tmp_path / "split.zip")
    with (
        serve(
            demo.home,
            tmp_path / "server.log",
            "helpers.slow_jobs:create_slow_app",
            SLOW_JOB_DELAY_S="1.0",
            SPLITAUDIT_JOB_POLL_S="0.2",
        ) as server,
        server.client() as api,
        browser_page() as page,
    ):
        page.goto(f"{server.url}/ui/audits/new")
        page.set_input_files("#split-file", str(archive))
        assert page.locator('input[name="corpus"][value="demo"]').is_checked()
        page.fill("#t-phash_hamming", "10")
        page.click("#upload-submit")
        page.wait_for_url(re.compile(r".*/ui/audits/\d+$"))
        audit_id = int(page.url.rsplit("/", 1)[1])
        assert api.get(f"/api/v1/audits/{audit_id}").json()["thresholds"]["phash_hamming"] == 10

        # The list shows the audit with a progress bar that fills as the job reports progress.
        page.goto(f"{server.url}/ui")
        row = page.locator(f'tr[data-audit-id="{audit_id}"]')
        wait_for_js(
            page,
            f"""() => {{ const p = document.querySelector('tr[data-audit-id="{audit_id}"] progress');
                        return p && p.value > 0 && p.value < 1; }}""",
            timeout=60_000,
        )
        first = float(row.locator("progress").evaluate("p => p.value"))
        wait_for_js(
            page,
            f"""() => {{ const p = document.querySelector('tr[data-audit-id="{audit_id}"] progress');
                        return p && p.value > {first}; }}""",
            timeout=60_000,
        )
        row.locator('[data-field="status"]').filter(has_text="done").wait_for(timeout=120_000)
        done = api.get(f"/api/v1/audits/{audit_id}").json()
        assert done["status"] == "done"
        assert row.locator('[data-field="flagged"]').inner_text() == str(done["summary"]["flagged"])
        assert row.locator('td[data-kind="exact"]').inner_text() == str(
            done["summary"]["by_kind"]["exact"]
        )

        # The summary page reloads itself when a running audit finishes.
        page.goto(f"{server.url}/ui/audits/{audit_id}")
        page.locator("#n-items").wait_for()
        assert page.locator("#n-items").inner_text() == str(done["summary"]["items"])


def test_token_is_asked_for_kept_in_the_session_and_sent_on_reads_and_writes(
    tmp_path: Path,
) -> None:
    demo = build_demo_home(tmp_path)
    aid = demo.audit_id
    with (
        serve(
            demo.home,
            tmp_path / "server.log",
            SPLITAUDIT_RUN_WORKER="false",
            SPLITAUDIT_API_TOKENS="carol:tok-carol-0123456789",
        ) as server,
        server.client("tok-carol-0123456789") as api,
        browser_page() as page,
    ):
        page.goto(f"{server.url}/ui/audits/{aid}/review/1")
        assert page.locator('body[data-page="auth-required"]').count() == 1
        page.click("#main [data-token-open]")
        page.fill("#token-input", "tok-carol-0123456789")
        page.press("#token-input", "Enter")
        page.locator('body[data-page="pair"]').wait_for()
        page.locator(".pane-test img.thumb[src^='blob:']").wait_for()
        assert page.evaluate("sessionStorage.getItem('splitaudit.token')") == "tok-carol-0123456789"
        match_id = int(page.locator("body").get_attribute("data-match-id") or 0)
        page.keyboard.press("u")
        page.locator("#current-verdict .badge.verdict-unsure").wait_for()
        assert "carol" in page.locator("#current-verdict").inner_text()
        review = api.get(f"/api/v1/matches/{match_id}").json()["review"]
        assert (review["verdict"], review["reviewer"]) == ("unsure", "carol")
