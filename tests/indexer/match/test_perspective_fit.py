"""A corpus photo on a screen photographed at an angle is fitted in perspective (issue 23):
a homography where one similarity explains only a band of the matches, the content check
through it; an upright copy keeps its similarity fit, an unrelated photo stays no copy."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from bench.screen_photos import screen_photo, smooth_room
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import geometry
from splitaudit.indexer.match.content_check import content_agreement, content_pixels, project
from splitaudit.indexer.match.geometry import Keypoints, geometric_match


def _screen(name: str, yaw: float, pitch: float, share: float = 0.7):  # type: ignore[no-untyped-def]
    return screen_photo(
        sample_photo(name), smooth_room(), share, yaw, pitch, np.random.default_rng(1)
    )


@pytest.mark.parametrize(("name", "yaw", "pitch"), [("coffee", 28, 12), ("chelsea", -30, -10)])
def test_a_photo_of_a_screen_at_an_angle_is_a_copy_in_perspective(
    name: str, yaw: float, pitch: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    shot = _screen(name, yaw, pitch)
    fit = geometric_match(shot.image, sample_photo(name))
    assert fit.perspective and len(fit.perspective) == 9
    assert fit.is_copy() and fit.inset
    assert fit.content is not None and fit.content.score >= 0.85
    assert fit.evidence()["perspective"] is True
    assert np.allclose(fit.test_box, shot.photo_box, atol=0.02), (fit.test_box, shot.photo_box)
    # one similarity fits a band of the picture: fewer inliers, and the content check, aligning
    # the rest of it wrongly, refuses the fit (the audit before the homography)
    monkeypatch.setattr(geometry, "_perspective", lambda *args: None)
    flat = geometric_match(shot.image, sample_photo(name))
    assert not flat.perspective and flat.inliers * 1.5 < fit.inliers
    assert flat.content is not None and not flat.content.passed
    assert not flat.is_copy()


def test_an_upright_copy_keeps_its_similarity_fit() -> None:
    photo = sample_photo("astronaut")
    crop = photo.crop((60, 40, 460, 440)).resize((300, 300), Image.Resampling.LANCZOS)
    fit = geometric_match(crop, photo)
    assert fit.is_copy() and not fit.perspective and len(fit.transform) == 6
    assert "perspective" not in fit.evidence()


def test_a_photo_the_corpus_does_not_hold_on_a_screen_is_no_copy() -> None:
    fit = geometric_match(_screen("rocket", 25, 10).image, sample_photo("coffee"))
    assert not fit.is_copy() and fit.inliers < 8


def _keypoints(width: int, height: int) -> Keypoints:
    empty = np.zeros((0, 2), np.float32)
    return Keypoints(empty, np.zeros((0, 128), np.float32), width, height)


def _homography(quad: list[list[float]], width: int = 300, height: int = 200) -> np.ndarray:
    """The homography (test -> corpus) that draws a ``width`` x ``height`` corpus image's
    corners at ``quad`` on the test image."""
    import cv2

    corpus = np.float32([[0, 0], [width, 0], [width, height], [0, height]])
    return np.asarray(cv2.getPerspectiveTransform(np.float32(quad), corpus), np.float64)


@pytest.mark.parametrize(
    ("quad", "plausible"),
    [
        ([[100, 100], [400, 120], [400, 280], [100, 300]], True),  # seen from the left
        ([[100, 100], [420, 100], [400, 300], [120, 300]], True),  # seen from below
        ([[400, 100], [100, 100], [100, 300], [400, 300]], False),  # mirrored
        ([[100, 100], [400, 180], [400, 220], [100, 300]], False),  # far side under half
        ([[100, 100], [400, 100], [600, 300], [300, 300]], False),  # sheared 45 degrees
        ([[100, 100], [400, 300], [400, 100], [100, 300]], False),  # crossed: not convex
    ],
)
def test_perspective_plausible(quad: list[list[float]], plausible: bool) -> None:
    found = geometry._perspective_plausible(_homography(quad), _keypoints(300, 200))
    assert found is plausible


def test_project_maps_affine_and_perspective_points() -> None:
    points = np.array([[0.0, 0.0], [10.0, 5.0]])
    affine = np.array([[2.0, 0.0, 1.0], [0.0, 3.0, -1.0]])
    assert np.allclose(project(affine, points), [[1, -1], [21, 14]])
    square = np.vstack([affine, [0.0, 0.01, 1.0]])
    expected = np.array([[1 / 1.0, -1 / 1.0], [21 / 1.05, 14 / 1.05]])
    assert np.allclose(project(square, points), expected)


def test_the_content_check_through_an_affine_3x3_is_the_2x3_one() -> None:
    gray = np.asarray(sample_photo("camera").convert("L").resize((384, 384)))
    pixels = content_pixels(gray)
    affine = np.array([[0.9, 0.05, 12.0], [-0.05, 0.9, 7.0]])
    flat = content_agreement(pixels, (384, 384), pixels, (384, 384), affine)
    square = content_agreement(
        pixels, (384, 384), pixels, (384, 384), np.vstack([affine, [0.0, 0.0, 1.0]])
    )
    assert flat is not None and square is not None
    assert (square.cells, square.agreeing) == (flat.cells, flat.agreeing)
    assert square.score == pytest.approx(flat.score)


def test_the_overlap_of_a_homography_past_its_horizon_is_the_covered_part() -> None:
    from splitaudit.indexer.match.content_check import covered

    # an affine map as 3 x 3 with a tiny perspective part: the grid's box is the exact one
    # within 1/64 of the side
    near_affine = np.array([[0.5, 0.0, 10.0], [0.0, 0.5, 20.0], [1e-9, 0.0, 1.0]])
    found = covered(near_affine, (300, 200), (400, 300))
    assert found is not None
    assert np.allclose(found, (10, 20, 160, 120), atol=400 / 64), found
    # the test image's right side lies past the homography's horizon (depth <= 0 there): its
    # corners mapped forward flip sign, the corpus points mapped back do not
    tilted = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-0.004, 0.0, 1.0]])
    corners = np.array([[0, 0], [300, 0], [300, 200], [0, 200]], np.float64)
    assert (np.hstack([corners, np.ones((4, 1))]) @ tilted.T)[1, 2] < 0
    found = covered(tilted, (300, 200), (400, 300))
    assert found is not None
    x0, y0, x1, y1 = found
    assert x0 == 0 and y0 == 0 and x1 == 400 and y1 > 150
