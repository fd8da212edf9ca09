"""`splitaudit audit --html`: the file opens in Chromium from disk, every thumbnail loads, no request leaves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from ui_browser_support import (
    browser_page,
    build_demo_home,
    require_chromium,
    save_screenshot,
    zip_folder,
)

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.reporting.evidence_lines import region_box

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_html_report_opens_from_disk_with_every_thumbnail_and_no_network(tmp_path: Path) -> None:
    require_chromium()
    demo = build_demo_home(tmp_path, audit=False)
    # An archive split: its images only exist in a temporary folder while the audit runs.
    split = zip_folder(demo.data / "split", tmp_path / "split.zip")
    out, as_json = tmp_path / "report" / "leak.html", tmp_path / "report" / "leak.json"
    result = CliRunner().invoke(
        cli,
        [
            "audit",
            str(split),
            "--corpus",
            "demo",
            "--home",
            str(demo.home),
            "--html",
            str(out),
            "--json",
            str(as_json),
            "--quiet",
        ],
    )
    assert result.exit_code == 1, result.output  # the planted copies fail the gate
    report = json.loads(as_json.read_text())
    matches = [m for item in report["items"] for m in item["matches"]]
    flagged = {item["key"] for item in report["items"] if item["matches"]}
    assert set(demo.planted) <= flagged
    page_text = out.read_text(encoding="utf-8")
    pairs = len(re.findall(r'<section class="pair', page_text))
    assert pairs == len(matches) >= len(demo.planted)
    expected_images = pairs + sum(m["corpus_item_id"] is not None for m in matches)
    requests: list[str] = []
    with browser_page() as page:
        page.on("request", lambda r: requests.append(r.url))
        page.goto(out.as_uri())
        page.wait_for_load_state("load")
        assert page.locator("section.pair").count() == pairs
        # The matched region is drawn over the image it lies on, inside that image.
        boxes = sum(
            region_box(m["evidence"], on_test=side) is not None
            for m in matches
            for side in (False, True)
        )
        assert page.locator("svg.region").count() == boxes
        for frame in page.locator("div.frame").all():
            image = frame.locator("img").bounding_box()
            rect = frame.locator("rect").bounding_box()
            assert image and rect and rect["width"] > 2 and rect["height"] > 2
            assert (
                image["x"] - 2 <= rect["x"]
                and rect["x"] + rect["width"] <= image["x"] + image["width"] + 2
            )
        state = page.evaluate(
            "() => [...document.images].map(i => [i.complete, i.naturalWidth, i.src.slice(0, 16)])"
        )
        save_screenshot(page, "html-report.png")
    assert len(state) == expected_images  # the test image and (unless a self leak) the corpus image
    assert all(
        complete and width > 0 and src.startswith("data:image/") for complete, width, src in state
    ), state
    assert [u for u in requests if not u.startswith("data:")] == [out.as_uri()]
