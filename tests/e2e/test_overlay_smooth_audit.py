"""End to end through the CLI: smooth photos (a rocket against the sky, a cell culture, a clock
face, the moon) under one tiled watermark. The watermark is most of their texture, so its
strokes agree cell by cell and the content check passes, and it dominates their thumbnails
(the pixel verifier called such a pair near); the photos under the strokes differ, so no pair
is near. A copy of one of them, watermark and all, stays near."""

from __future__ import annotations

import pytest
from helpers.cli_audit import index_and_audit
from helpers.overlay_images import tiled_watermark
from PIL import Image

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.content_check import AGREEING_LAYOUT

pytestmark = pytest.mark.slow


def _corner(name: str) -> Image.Image:
    """The top-left quarter of a sample photo (its smoothest part for these four)."""
    photo = sample_photo(name)
    return photo.crop((0, 0, photo.width // 2, photo.height // 2))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str) -> dict:
    """Corpus: the cell, the clock and the moon under one tiled watermark. Split: the rocket
    under the same watermark, and the watermarked cell re-encoded as a JPEG."""
    root = tmp_path_factory.mktemp("overlay-smooth-audit")
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    for name in ("cell", "clock", "moon"):
        tiled_watermark(_corner(name)).save(corpus / f"wm_{name}.png")
    tiled_watermark(_corner("rocket")).save(split / "wm_rocket.png")
    tiled_watermark(_corner("cell")).save(split / "wm_cell_copy.jpg", quality=85)
    return index_and_audit(corpus, split, root / "home", tiny_model_spec)


def _item(report: dict, key: str) -> dict:
    return next(it for it in report["items"] if it["key"] == key)


def test_smooth_photos_under_one_tiled_watermark_are_not_near(report: dict) -> None:
    rocket = _item(report, "wm_rocket.png")
    assert [m for m in rocket["matches"] if m["kind"] == "near"] == [], rocket
    assert rocket["verdict"] in ("clean", "semantic")
    # the fits on the watermark are kept in the evidence as discarded, saying why
    discarded = [
        m["evidence"]["geometry"]["discarded"]
        for m in rocket["matches"]
        if "discarded" in m["evidence"].get("geometry", {})
    ]
    assert discarded, rocket["matches"]
    assert all(d["inliers"] > 0 and "overlay" in d["reason"] for d in discarded)
    assert any("texture only" in d["reason"] for d in discarded)
    # what the watermark brought close is vetoed: no near rule is given for any match
    assert all("near_rules" not in m["evidence"] for m in rocket["matches"])


def test_a_copy_of_a_smooth_watermarked_photo_stays_near(report: dict) -> None:
    near = [m for m in _item(report, "wm_cell_copy.jpg")["matches"] if m["kind"] == "near"]
    assert [m["corpus_key"] for m in near] == ["wm_cell.png"]
    geometry = near[0]["evidence"]["geometry"]
    assert "discarded" not in geometry
    content = geometry["content"]
    assert content["agreeing_layout"] >= AGREEING_LAYOUT
    x0, y0, x1, y1 = content["region"]
    assert x1 - x0 > 0.7 and y1 - y0 > 0.7
