"""End to end through the CLI with the bundled model: a corpus photo inset at 40% of a larger,
screenshot-like test image is near, with its box drawn on the test image; a screenshot showing
a photo the corpus does not hold is not (issue 23)."""

from __future__ import annotations

import numpy as np
import pytest
from cli_audit_support import audit_folders, paste_fitted
from helpers.cli_audit import near_matches
from PIL import Image, ImageDraw

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.inset_candidates import INSET_MIN_SIDE, region_boxes

pytestmark = pytest.mark.slow
Box = tuple[float, ...]
Audited = tuple[dict, Box, Box, Box, dict[str, Box]]
CANVAS = (960, 600)


def screenshot(
    photo: Image.Image, fraction: float, at: tuple[float, float]
) -> tuple[Image.Image, tuple[float, float, float, float]]:
    """``photo`` fitted in ``fraction`` of a page-like canvas, its top-left at ``at`` (fractions
    of the canvas); the canvas and the photo's box on it (fractions of its width / height)."""
    w, h = CANVAS
    canvas = Image.new("RGB", CANVAS, (250, 250, 252))
    draw = ImageDraw.Draw(canvas)
    draw.rectangle((0, 0, w, 36), fill=(60, 64, 72))
    rng = np.random.default_rng(1)
    for y in range(60, h - 20, 22):  # text-like lines
        draw.rectangle((24, y, 24 + int(rng.integers(200, w - 60)), y + 8), fill=(90, 90, 96))
    return canvas, paste_fitted(canvas, photo, fraction, at)


@pytest.fixture(scope="module")
def audited(
    tmp_path_factory: pytest.TempPathFactory,
) -> Audited:
    from click.testing import CliRunner

    from splitaudit.indexer.cli.main import cli

    root = tmp_path_factory.mktemp("inset-audit")
    corpus, split, home = audit_folders(root)
    for name in ("chelsea", "coffee", "rocket", "camera", "hubble_deep_field"):
        sample_photo(name).save(corpus / f"{name}.png")
    shot, box = screenshot(sample_photo("chelsea"), 0.4, (0.45, 0.3))
    shot.save(split / "screenshot.png")
    # at 30% the whole page's embedding no longer nominates the photo: a region's does
    small, small_box = screenshot(sample_photo("coffee"), 0.3, (0.08, 0.55))
    small.save(split / "screenshot_30.png")
    # on the 256-px decode this one fits with 4 inliers: the refit on a full-resolution crop
    # of the screenshot around that fit's box settles it
    rocket, rocket_box = screenshot(sample_photo("rocket"), 0.3, (0.6, 0.12))
    rocket.save(split / "screenshot_rocket_30.png")
    # a star field at 30%: the reduced decode keeps a few scattered inliers and no box; the
    # crop of the region that nominated it settles it
    stars, stars_box = screenshot(sample_photo("hubble_deep_field"), 0.3, (0.62, 0.58))
    stars.save(split / "screenshot_stars_30.png")
    other, _ = screenshot(sample_photo("astronaut"), 0.4, (0.1, 0.2))
    other.save(split / "unrelated_screenshot.png")
    runner = CliRunner()
    common = ["--corpus", "c", "--home", str(home)]
    done = runner.invoke(cli, ["index", str(corpus), *common, "--model", "efficientnet-lite0"])
    assert done.exit_code == 0, done.output
    out = root / "report.json"
    done = runner.invoke(cli, ["audit", str(split), *common, "--json", str(out)])
    assert done.exit_code in (0, 1), done.output
    import json

    boxes = {"stars": stars_box}
    return json.loads(out.read_text()), box, small_box, rocket_box, boxes


def test_a_photo_inset_at_40_percent_is_near_with_its_box_on_the_test_image(
    audited: Audited,
) -> None:
    report, box, _, _, _ = audited
    near = near_matches(report, "screenshot.png")
    assert set(near) == {"chelsea.png"}
    geometry = near["chelsea.png"]["evidence"]["geometry"]
    assert geometry["inset"] is True
    assert np.allclose(geometry["test_box"], box, atol=0.03), (geometry["test_box"], box)


def test_a_screenshot_of_a_photo_not_in_the_corpus_is_not_near(
    audited: Audited,
) -> None:
    report, _, _, _, _ = audited
    assert near_matches(report, "unrelated_screenshot.png") == {}


def test_a_photo_inset_at_30_percent_is_near_through_a_region_of_the_test_image(
    audited: Audited,
) -> None:
    report, _, box, _, _ = audited
    near = near_matches(report, "screenshot_30.png")
    assert set(near) == {"coffee.png"}
    geometry = near["coffee.png"]["evidence"]["geometry"]
    assert np.allclose(geometry["test_box"], box, atol=0.03), (geometry["test_box"], box)


def test_a_small_inset_with_few_keypoints_on_the_reduced_decode_is_near_after_the_refit(
    audited: Audited,
) -> None:
    report, _, _, box, _ = audited
    near = near_matches(report, "screenshot_rocket_30.png")
    assert set(near) == {"rocket.png"}
    geometry = near["rocket.png"]["evidence"]["geometry"]
    assert geometry["inset"] is True and geometry["inliers"] >= 50
    assert np.allclose(geometry["test_box"], box, atol=0.02), (geometry["test_box"], box)


def test_a_star_field_inset_without_keypoints_on_the_reduced_decode_is_near_by_its_region(
    audited: Audited,
) -> None:
    report, _, _, _, boxes = audited
    near = near_matches(report, "screenshot_stars_30.png")
    assert set(near) == {"hubble_deep_field.png"}
    geometry = near["hubble_deep_field.png"]["evidence"]["geometry"]
    assert geometry["inset"] is True and geometry["inliers"] >= 12
    assert np.allclose(geometry["test_box"], boxes["stars"], atol=0.02), geometry["test_box"]


def test_only_large_test_images_get_regions() -> None:
    assert region_boxes(INSET_MIN_SIDE - 1, 2000) == []
    boxes = region_boxes(1000, 500)
    assert len(boxes) == 9
    assert boxes[0] == (0, 0, 450, 225) and boxes[-1] == (550, 275, 1000, 500)
