"""End to end through the CLI (``splitaudit index`` + ``splitaudit audit --json``): photos that
share only an overlay are not near; a copy under or without the overlay is; a corpus photo
inset in a larger test image is near with its box on the test image."""

from __future__ import annotations

import json

import pytest
from helpers.chrome_images import window_chrome
from helpers.cli_audit import index_and_audit
from helpers.overlay_images import fitted, inset, patterned_frame, tiled_watermark

from splitaudit.indexer.demo import sample_photo

pytestmark = pytest.mark.slow
INSET_AT = (430, 160)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str) -> dict:
    """Corpus: two photos under one tiled watermark, two in one frame, one plain. Split: two
    other photos under the same watermark and frame, one watermarked corpus photo without its
    watermark, the plain corpus photo inset at 40% in a slide."""
    root = tmp_path_factory.mktemp("overlay-audit")
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    photo = {n: sample_photo(n) for n in ("astronaut", "chelsea", "coffee", "rocket", "camera")}
    photo["motorcycle"] = sample_photo("motorcycle")
    photo["retina"] = sample_photo("retina")
    photo["tissue"] = sample_photo("immunohistochemistry")
    tiled_watermark(photo["astronaut"]).save(corpus / "wm_astronaut.png")
    tiled_watermark(photo["rocket"]).save(corpus / "wm_rocket.png")
    patterned_frame(photo["chelsea"]).save(corpus / "frame_chelsea.png")
    patterned_frame(photo["camera"]).save(corpus / "frame_camera.png")
    photo["motorcycle"].save(corpus / "motorcycle.png")
    window_chrome(photo["chelsea"]).save(corpus / "chrome_chelsea.png")
    window_chrome(photo["camera"]).save(corpus / "chrome_camera.png")
    window_chrome(photo["rocket"]).save(split / "chrome_rocket.png")
    tiled_watermark(photo["coffee"]).save(split / "wm_coffee.png")
    patterned_frame(photo["retina"]).save(split / "frame_retina.png")
    patterned_frame(photo["tissue"]).save(split / "frame_tissue.png")
    fitted(photo["astronaut"]).save(split / "astronaut_clean.png")
    tiled_watermark(photo["astronaut"]).save(split / "wm_astronaut_copy.jpg", quality=85)
    canvas, pasted = inset(photo["motorcycle"], 0.4, INSET_AT)
    canvas.save(split / "slide.png")
    (root / "pasted.json").write_text(json.dumps(pasted))
    data = index_and_audit(corpus, split, root / "home", tiny_model_spec)
    data["_pasted"] = pasted
    return data


def _item(report: dict, key: str) -> dict:
    return next(it for it in report["items"] if it["key"] == key)


def _near(item: dict) -> list[dict]:
    return [m for m in item["matches"] if m["kind"] == "near"]


@pytest.mark.parametrize(
    "key", ["wm_coffee.png", "frame_retina.png", "frame_tissue.png", "chrome_rocket.png"]
)
def test_unrelated_photos_under_a_shared_overlay_are_not_near(report: dict, key: str) -> None:
    item = _item(report, key)
    assert _near(item) == [], item
    assert item["verdict"] in ("clean", "semantic")


def test_same_photo_without_the_watermark_is_near_with_its_content_region(report: dict) -> None:
    near = _near(_item(report, "astronaut_clean.png"))
    assert [m["corpus_key"] for m in near] == ["wm_astronaut.png"]
    evidence = near[0]["evidence"]
    assert "geometry" in evidence["near_rules"]
    content = evidence["geometry"]["content"]
    x0, y0, x1, y1 = content["region"]
    assert content["agreement"] >= 0.55 and x1 - x0 > 0.7 and y1 - y0 > 0.7


def test_a_watermarked_copy_stays_near_beside_other_photos_under_the_watermark(
    report: dict,
) -> None:
    """The corpus holds another photo under the same tiled watermark: the copy's fit shares the
    watermark's keypoints with the fit to it, but the copy agrees with its corpus photo where
    the two corpus photos differ, so nothing is discarded."""
    near = _near(_item(report, "wm_astronaut_copy.jpg"))
    assert [m["corpus_key"] for m in near] == ["wm_astronaut.png"]
    geometry = near[0]["evidence"]["geometry"]
    assert "geometry" in near[0]["evidence"]["near_rules"]
    assert "discarded" not in geometry and "shared" not in geometry
    x0, y0, x1, y1 = geometry["content"]["region"]
    assert x1 - x0 > 0.7 and y1 - y0 > 0.7


def test_inset_copy_is_near_with_the_box_on_the_test_image(report: dict) -> None:
    near = _near(_item(report, "slide.png"))
    assert [m["corpus_key"] for m in near] == ["motorcycle.png"]
    evidence = near[0]["evidence"]
    assert "geometry" in evidence["near_rules"]
    geometry = evidence["geometry"]
    assert geometry["inset"] is True
    assert geometry["test_box"] == pytest.approx(report["_pasted"], abs=0.02)


def test_overlay_fits_are_discarded_with_their_reason(report: dict) -> None:
    """A photo in the same window as two corpus photos: whatever the chrome brought close is
    not near, and a fit on the chrome is kept in the evidence as discarded, saying why."""
    rocket = _item(report, "chrome_rocket.png")
    for match in rocket["matches"]:
        assert match["kind"] != "near"
        assert "near_rules" not in match["evidence"]
        discarded = match["evidence"].get("geometry", {}).get("discarded")
        if discarded is not None:
            assert "overlay" in discarded["reason"] and discarded["inliers"] > 0
