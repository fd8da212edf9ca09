"""End to end through the CLI: an unrelated photo shown in a screenshot is not near corpus
photos under a window's chrome that the pixel verifier alone scores above ``verify_score``
(0.73-0.80: the chrome is most of their 32-px thumbnails, and SIFT finds no fit to check); a
re-encoded copy of one of them stays near (``verify_overlay``)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cli_audit import index_and_audit

from bench.accuracy.overlays import inset, screen_chrome
from splitaudit.indexer.demo import sample_photo

pytestmark = pytest.mark.slow
CHROME = ("moon", "brick", "gravel")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str) -> dict:
    root = tmp_path_factory.mktemp("verify-overlay-audit")
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    for name in CHROME:
        screen_chrome(sample_photo(name)).save(corpus / f"chrome_{name}.png")
    sample_photo("coffee").save(corpus / "coffee.png")
    inset(sample_photo("rocket"), 0.7, np.random.default_rng(1)).save(split / "rocket_page.png")
    screen_chrome(sample_photo("brick")).save(split / "brick_copy.jpg", quality=80)
    return index_and_audit(corpus, split, root / "home", tiny_model_spec)


def _item(report: dict, key: str) -> dict:
    return next(it for it in report["items"] if it["key"] == key)


def test_a_photo_sharing_only_the_chrome_is_not_near(report: dict) -> None:
    """Before ``verify_overlay``: near ``chrome_moon.png`` by the verifier alone (0.767, a fit
    of 3 scattered inliers)."""
    page = _item(report, "rocket_page.png")
    near = [(m["corpus_key"], m["evidence"]) for m in page["matches"] if m["kind"] == "near"]
    assert near == []


def test_a_copy_under_the_same_chrome_stays_near(report: dict) -> None:
    copy = _item(report, "brick_copy.jpg")
    near = [m for m in copy["matches"] if m["kind"] == "near"]
    assert [m["corpus_key"] for m in near] == ["chrome_brick.png"]
