"""Pictures seen at an angle are cut out as regions (``quad_regions``): a monitor photographed
at an angle, whose slanted edges no axis-aligned frame fits, is found around the photo it
shows, and the region crops of the test image include it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from bench.screen_photos import screen_photo, smooth_room
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import quad_regions
from splitaudit.indexer.match.framed_regions import framed_boxes
from splitaudit.indexer.match.inset_candidates import region_crops, region_decode
from splitaudit.indexer.match.quad_regions import edge_support, pictures_at_an_angle, quad_boxes


def _screen(yaw: float, pitch: float, photo: str = "coffee", dark: float = 1.0):  # type: ignore[no-untyped-def]
    room = Image.fromarray((np.asarray(smooth_room()) * dark).astype(np.uint8))
    shot = screen_photo(sample_photo(photo), room, 0.35, yaw, pitch, np.random.default_rng(3))
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


def test_the_region_crops_of_a_screen_photo_include_the_screen_seen_head_on() -> None:
    shot, image = _screen(22, 8)
    crops, rows, boxes = region_crops([image], 0, [image.size])
    assert len(crops) == 9 + 1 and set(rows.tolist()) == {0}  # the grid, then the screen
    assert _inside(shot.photo_box, tuple(boxes[-1]))
    # the monitor seen head-on through its corners, not its bounding box cut out
    (quad,) = quad_regions.quads(image)
    flat = quad_regions.head_on(image, quad.corners)
    assert crops[-1].size == flat.size and np.array_equal(np.asarray(crops[-1]), np.asarray(flat))
    # its corners are the screen's (the bench's own, to 1% of the image)
    corners = np.asarray(shot.corners) / (1280, 960)
    assert np.allclose(quad.corners, corners, atol=0.01), (quad.corners, corners)


def test_a_smooth_room_has_no_quadrilateral_and_a_framed_picture_is_not_found_twice() -> None:
    assert quad_boxes(smooth_room()) == []
    _, image = _screen(22, 8)
    (screen,) = quad_boxes(image)[:1]
    assert [q.box for q in pictures_at_an_angle(image, [])] == quad_boxes(image)
    # a frame found already around the same picture (axis-aligned finds come first)
    x0, y0, x1, y1 = screen
    again = pictures_at_an_angle(image, [(x0 + 0.01, y0 + 0.01, x1, y1)])
    assert [q.box for q in again] == quad_boxes(image)[1:]


def _around(shot, boxes) -> list[float]:  # type: ignore[no-untyped-def]
    """Each box holding the shown photo (to 1% of the image), as its area over the photo's."""
    x0, y0, x1, y1 = shot.photo_box
    inner = (x0 + 0.01, y0 + 0.01, x1 - 0.01, y1 - 0.01)
    return [_area(b) / _area(shot.photo_box) for b in boxes if _inside(inner, b)]


def test_a_monitor_on_a_dark_room_closes_at_the_weaker_thresholds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shot, image = _screen(22, 8, dark=0.5)  # a dark bezel on a darkened room
    assert 1 < min(_around(shot, quad_boxes(image))) < 1.6
    monkeypatch.setattr(quad_regions, "CANNY", quad_regions.CANNY[:1])  # 50 / 150 alone
    assert _around(shot, quad_boxes(image)) == []


def test_an_outline_with_a_gap_is_taken_by_its_hull_where_the_edges_trace_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shot, image = _screen(22, 8, photo="astronaut", dark=0.5)
    assert 1 < min(_around(shot, quad_boxes(image))) < 2.5  # the monitor around the photo
    monkeypatch.setattr(quad_regions, "SUPPORT", 1.01)  # no hull is ever taken
    assert _around(shot, quad_boxes(image)) == []


def test_a_photo_nested_in_its_monitors_outline_is_a_region_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shot, image = _screen(-25, -6, photo="astronaut")
    monitor, photo = sorted(_around(shot, quad_boxes(image)), reverse=True)
    assert monitor > 2 and 1 < photo < 1.4
    monkeypatch.setattr(quad_regions, "NESTED_AREA", 0.0)  # a box inside a kept one: the same
    assert len(_around(shot, quad_boxes(image))) == 1


def test_edge_support_is_the_least_traced_side() -> None:
    edges = np.zeros((100, 100), np.uint8)
    quad = np.array([[10, 10], [90, 10], [90, 80], [10, 80]], np.float64)
    edges[10, 10:91] = edges[80, 10:91] = edges[10:81, 10] = edges[10:81, 90] = 255
    assert edge_support(edges, quad) == 1.0
    edges[10, 50:91] = 0  # the top side half erased
    assert edge_support(edges, quad) == pytest.approx(0.5, abs=0.02)


def test_the_photo_a_monitor_shows_is_found_inside_its_quad_seen_head_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a letterboxed photo whose own outline merges with the monitor's: only the monitor closes
    shot, image = _screen(22, 8, photo="astronaut")
    around = sorted(_around(shot, quad_boxes(image)))
    assert len(around) == 2 and 1 <= around[0] < 1.15 and around[1] > 2  # photo, monitor
    photo = np.asarray(shot.photo) / (1280, 960)  # its corners: the shown photo's
    assert any(np.allclose(q.corners, photo, atol=0.025) for q in quad_regions.quads(image))
    monkeypatch.setattr(quad_regions, "INNER_FROM", 0)
    assert [a > 2 for a in _around(shot, quad_boxes(image))] == [True]


def test_a_quad_with_no_picture_inside_gives_none() -> None:
    corners = np.array([[0.2, 0.2], [0.8, 0.25], [0.8, 0.75], [0.2, 0.8]])
    assert quad_regions.picture_inside(smooth_room(), corners) is None


def test_a_screen_photo_under_inset_min_side_gets_the_screen_and_no_grid() -> None:
    from splitaudit.indexer.match.inset_candidates import FRAMES_MIN_SIDE, INSET_MIN_SIDE

    shot, _ = _screen(22, 8)
    small = shot.image.resize((480, 360), Image.Resampling.LANCZOS)
    assert FRAMES_MIN_SIDE <= 360 < INSET_MIN_SIDE
    data = io.BytesIO()
    small.save(data, "JPEG", quality=80)
    image = region_decode(data.getvalue())
    crops, rows, boxes = region_crops([image], 0, [small.size])
    # a web-sized photo of a monitor: the screen, seen head-on, is its one region
    assert len(crops) == 1 and rows.tolist() == [0]
    assert _inside(shot.photo_box, tuple(boxes[0])), (boxes[0], shot.photo_box)
    assert _area(tuple(boxes[0])) < 2.0 * _area(shot.photo_box)
