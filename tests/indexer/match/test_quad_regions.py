"""Pictures seen at an angle are cut out as regions (``quad_regions``): a monitor photographed
at an angle, whose slanted edges no axis-aligned frame fits, is found around the photo it
shows, and the region crops of the test image include it."""

from __future__ import annotations

import io

import numpy as np
import pytest

from bench.screen_photos import screen_photo, smooth_room
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.framed_regions import framed_boxes
from splitaudit.indexer.match.inset_candidates import region_crops, region_decode
from splitaudit.indexer.match.quad_regions import pictures_at_an_angle, quad_boxes


def _screen(yaw: float, pitch: float):  # type: ignore[no-untyped-def]
    shot = screen_photo(
        sample_photo("coffee"), smooth_room(), 0.35, yaw, pitch, np.random.default_rng(3)
    )
    data = io.BytesIO()
    shot.image.save(data, "JPEG", quality=80)
    return shot, region_decode(data.getvalue())


def _inside(inner: tuple[float, ...], outer: tuple[float, ...]) -> bool:
    return (
        outer[0] <= inner[0]
        and outer[1] <= inner[1]
        and inner[2] <= outer[2]
        and inner[3] <= outer[3]
    )


def _area(box: tuple[float, ...]) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


@pytest.mark.parametrize(("yaw", "pitch"), [(22, 8), (-25, -6)])
def test_a_screen_at_an_angle_is_found_around_the_photo_it_shows(yaw: float, pitch: float) -> None:
    shot, image = _screen(yaw, pitch)
    assert framed_boxes(image) == []  # no axis-aligned frame fits its slanted edges
    found = quad_boxes(image)
    assert found, "no quadrilateral found"
    box = found[0]
    assert _inside(shot.photo_box, box), (box, shot.photo_box)
    assert _area(box) < 2.0 * _area(shot.photo_box)  # the monitor: bezel and letterbox bars


def test_the_region_crops_of_a_screen_photo_include_the_screen() -> None:
    shot, image = _screen(22, 8)
    crops, rows, boxes = region_crops([image], 0, [image.size])
    assert len(crops) == 9 + 1 and set(rows.tolist()) == {0}  # the grid, then the screen
    assert _inside(shot.photo_box, tuple(boxes[-1]))


def test_a_smooth_room_has_no_quadrilateral_and_a_framed_picture_is_not_found_twice() -> None:
    assert quad_boxes(smooth_room()) == []
    _, image = _screen(22, 8)
    (screen,) = quad_boxes(image)[:1]
    assert pictures_at_an_angle(image, []) == quad_boxes(image)
    # a frame found already around the same picture (axis-aligned finds come first)
    x0, y0, x1, y1 = screen
    assert pictures_at_an_angle(image, [(x0 + 0.01, y0 + 0.01, x1, y1)]) == quad_boxes(image)[1:]
