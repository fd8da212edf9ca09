"""End to end through the CLI with the bundled model: corpus photos shown on a monitor and
photographed at an angle (yaw 28-30 degrees) are near, fitted in perspective, with the shown
photo's box on the test image; a photo the corpus does not hold, on the same kind of screen,
stays clean (issue 23, "a photo of a screen").

With the perspective fit switched off the same audit misses both: one similarity explains only a
band of the picture seen at an angle, and the content check, aligning the rest of it wrongly,
refuses the fit as resting on a shared overlay."""

from __future__ import annotations

import numpy as np
import pytest
from cli_audit_support import audit_folders, audit_report, index_corpus, only_near_geometry
from helpers.cli_audit import near_matches

from bench.screen_photos import screen_photo, smooth_room
from splitaudit.indexer.demo import sample_photo

pytestmark = pytest.mark.slow
Box = tuple[float, float, float, float]
CORPUS = ("coffee", "chelsea", "immunohistochemistry", "camera", "page")
SCREENS = {"coffee": (28.0, 12.0), "chelsea": (-30.0, -10.0)}


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict[str, Box]]:
    from splitaudit.indexer.match import geometry

    root = tmp_path_factory.mktemp("screen-audit")
    corpus, split, home = audit_folders(root)
    for name in CORPUS:
        sample_photo(name).save(corpus / f"{name}.png")
    boxes: dict[str, Box] = {}
    rng = np.random.default_rng(1)
    for name, (yaw, pitch) in SCREENS.items():
        shot = screen_photo(sample_photo(name), smooth_room(), 0.7, yaw, pitch, rng)
        shot.image.save(split / f"screen_{name}.jpg", quality=80)
        boxes[name] = shot.photo_box
    other = screen_photo(sample_photo("astronaut"), smooth_room(), 0.7, 25.0, 8.0, rng)
    other.image.save(split / "screen_unrelated.jpg", quality=80)
    index_corpus(corpus, home)
    flat = (geometry, "_perspective", lambda *args: None)
    return (
        audit_report(split, home, root / "report.json"),
        audit_report(split, home, root / "report-flat.json", flat),
        boxes,
    )


@pytest.mark.parametrize("name", sorted(SCREENS))
def test_a_photo_of_a_screen_at_an_angle_is_near_with_its_box(
    audited: tuple[dict, dict, dict[str, Box]], name: str
) -> None:
    report, _, boxes = audited
    geometry = only_near_geometry(report, f"screen_{name}.jpg", f"{name}.png")
    assert geometry["perspective"] is True and geometry["inset"] is True
    assert np.allclose(geometry["test_box"], boxes[name], atol=0.03), geometry["test_box"]


def test_an_unrelated_photo_on_a_screen_is_clean(
    audited: tuple[dict, dict, dict[str, Box]],
) -> None:
    report, _, _ = audited
    assert near_matches(report, "screen_unrelated.jpg") == {}


@pytest.mark.parametrize("name", sorted(SCREENS))
def test_without_the_perspective_fit_the_screen_is_missed(
    audited: tuple[dict, dict, dict[str, Box]], name: str
) -> None:
    _, flat, _ = audited
    assert near_matches(flat, f"screen_{name}.jpg") == {}
