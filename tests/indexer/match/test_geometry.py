"""Geometric verification: a known crop / rotation / scale is recovered; other regions are not copies."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageOps

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.geometry import MIN_INLIERS, geometric_match, keypoints


@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    return sample_photo("astronaut")  # 512 x 512


def _rotated_crop(image: Image.Image, box: tuple[int, int, int, int], angle: float) -> Image.Image:
    crop = image.crop(box)
    return crop.rotate(
        angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(255, 255, 255)
    )


@pytest.mark.parametrize("angle", [-15.0, -10.0, 0.0, 5.0, 15.0])
def test_half_side_crop_rotated_is_located_with_scale_and_angle(
    astronaut: Image.Image, angle: float
) -> None:
    box = (200, 60, 456, 316)  # 50% of the side: a quarter of the picture
    query = _rotated_crop(astronaut, box, angle)
    query = query.resize((query.width * 3 // 4, query.height * 3 // 4))
    match = geometric_match(query, astronaut)
    assert match.is_copy(), match
    assert match.angle == pytest.approx(angle, abs=1.0)
    # The expanded canvas of a rotated crop covers (cos + sin) of the crop's side.
    turn = math.radians(abs(angle))
    expected_side = 0.5 * (math.cos(turn) + math.sin(turn))
    assert match.scale == pytest.approx(expected_side, rel=0.06)
    centre = ((match.box[0] + match.box[2]) / 2, (match.box[1] + match.box[3]) / 2)
    assert centre == pytest.approx((328 / 512, 188 / 512), abs=0.03)
    assert match.evidence()["box"] == [round(v, 4) for v in match.box]


def test_reencoded_bordered_captioned_crop_is_still_a_copy(
    astronaut: Image.Image, tmp_path: Path
) -> None:
    query = _rotated_crop(astronaut, (60, 100, 420, 460), 10.0)
    query = ImageOps.expand(query, border=30, fill=(20, 40, 200))
    ImageDraw.Draw(query).rectangle(
        (0, query.height - 60, query.width, query.height), fill=(0, 0, 0)
    )
    ImageDraw.Draw(query).text((20, query.height - 50), "repost 2024 #space", fill=(255, 255, 255))
    path = tmp_path / "q.jpg"
    query.save(path, quality=40)
    with Image.open(path) as reread:
        match = geometric_match(reread.convert("RGB"), astronaut)
    assert match.is_copy()
    assert match.angle == pytest.approx(10.0, abs=1.5)


def test_mirrored_crop_is_matched_as_mirrored(astronaut: Image.Image) -> None:
    query = ImageOps.mirror(astronaut.crop((100, 100, 400, 400)))
    match = geometric_match(query, astronaut)
    assert match.is_copy() and match.mirrored


def test_other_region_of_the_same_photo_is_not_a_copy(astronaut: Image.Image) -> None:
    left, right = astronaut.crop((0, 0, 230, 512)), astronaut.crop((282, 0, 512, 512))
    match = geometric_match(right, left)
    assert not match.is_copy()
    assert match.inliers < MIN_INLIERS


def test_unrelated_photos_are_not_copies(astronaut: Image.Image) -> None:
    for name in ("coffee", "rocket", "camera"):
        other = sample_photo(name)
        assert not geometric_match(other, astronaut).is_copy(), name
        assert not geometric_match(astronaut.crop((100, 100, 356, 356)), other).is_copy(), name


def test_flat_images_give_no_match_not_an_error() -> None:
    flat = Image.new("RGB", (200, 150), (128, 128, 128))
    match = geometric_match(flat, flat)
    assert match.inliers == 0 and not match.is_copy()


def test_keypoints_detected_in_a_pool_equal_the_sequential_ones() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from splitaudit.indexer.match.geometry import keypoints_async

    image = sample_photo("coffee")
    want = keypoints(image, with_mirror=True)
    with ThreadPoolExecutor(2) as pool:
        got = keypoints_async(image, pool)()
    assert want.mirrored is not None and got.mirrored is not None
    for a, b in ((got, want), (got.mirrored, want.mirrored)):
        assert np.array_equal(a.points, b.points) and np.array_equal(a.descriptors, b.descriptors)
        assert (a.width, a.height) == (b.width, b.height)


def test_reflected_keypoints_are_those_detected_on_the_mirror_image() -> None:
    from splitaudit.indexer.match import geometry

    image = sample_photo("coffee")
    plain = keypoints(image, with_mirror=True)
    detected = keypoints(ImageOps.mirror(image))
    derived = plain.mirrored
    assert derived is not None and (derived.width, derived.height) == (plain.width, plain.height)
    # pair each reflected keypoint with the detected one at the same place
    gaps = np.linalg.norm(derived.points[:, None, :] - detected.points[None, :, :], axis=2)
    nearest = gaps.argmin(axis=1)
    paired = gaps[np.arange(len(nearest)), nearest] < 0.5
    assert paired.sum() > 0.3 * len(plain)
    mass = np.abs(detected.descriptors[nearest[paired]]).sum(axis=1)

    def error(descriptors: np.ndarray) -> float:
        diff = np.abs(descriptors[paired] - detected.descriptors[nearest[paired]]).sum(axis=1)
        return float(np.median(diff / mass))

    assert error(derived.descriptors) < 0.3  # the same descriptors, up to resampling
    assert error(plain.descriptors) > 2 * error(derived.descriptors)  # not merely close anyway
    # reflecting twice gives the keypoints back
    twice = geometry._reflected(derived.points, derived.descriptors, plain.width, plain.height)
    np.testing.assert_allclose(twice.points, plain.points, atol=1e-3)
    assert np.array_equal(twice.descriptors, plain.descriptors)
