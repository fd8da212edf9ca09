"""Pictures seen at an angle: the quadrilaterals a photo of a screen or a print shows.

``framed_regions`` finds pictures by their straight horizontal and vertical edges; a monitor
photographed 10-30 degrees off shows its picture as a quadrilateral whose edges are slanted,
and none of the axis-aligned frames fits it (of ``bench.screen_photos``' 18 screens at 35% of
the canvas on seed 1, a frame was found on two, both at yaw 3). A grid window
45% of the side around such a screen is mostly room: 21 of 54 such screens at 35% were missed,
most of them nominated by nothing (docs/recall.md: with the shown photo's box as a region, all
seven such misses of seed 0 that fit at full resolution were near).

``quad_boxes`` finds them as a document scanner does: Canny edges of the reduced image at
three pairs of thresholds (``CANNY``: a dark bezel's outline on a darkened room closes only
at the lower ones), each closed by a 3 x 3 dilation, their contours approximated by polygons
(``APPROX`` of the perimeter) — or, where that is no convex quad (a gap in the outline, an
edge of the picture touching it), by their convex hull where every side of the hull runs
along edge pixels (``SUPPORT``) — and the four-cornered ones kept whose corners a flat
picture seen at an angle has (``geometry.plausible_quad``), each at least ``MIN_FRACTION`` of
the shorter side on both axes and under ``MAX_AREA`` of the image. A quad nested in a larger
one (under ``NESTED_AREA`` of it: the shown photo inside its monitor's outline) is kept beside
it, and inside the largest ones, seen head-on, the picture ``framed_regions`` finds (a
letterboxed photo whose own outline merges with the monitor's) is one more quad. Each is a
region like a frame: embedded seen head-on through its corners (``head_on``: no room around
it, no perspective), it nominates, and the geometric step on its bounding box's crop (in
perspective where it needs: ``geometry._perspective``) decides. A monitor's box is ~2x its
photo's, mostly bezel, bars and room: cut out, its embedding came within cosine 0.29-0.44 of
the photo on four misses where the photo's own box came within 0.53-0.64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from splitaudit.indexer.match.framed_regions import framed_boxes, shared_area
from splitaudit.indexer.match.geometry import plausible_quad

Box = tuple[float, float, float, float]

WORK_SIDE = 512  # long side (px) the image is reduced to
MIN_FRACTION = 0.15  # each side of the box, of the image's shorter side (as for frames)
MAX_AREA = 0.8  # boxes covering this share of the image or more are the image itself
APPROX = 0.03  # polygon approximation tolerance, of the contour's perimeter
MAX_QUADS = 4  # kept per image, largest first; each is one more embedding
MAX_OVERLAP = 0.6  # a box sharing this much of the smaller one's area with a kept one: the same
NESTED_AREA = 0.6  # ... unless it is under this share of the kept one's area: a picture inside
# Canny's hysteresis thresholds (grey levels), one edge map each, strongest first: at 50 / 150
# alone the monitor's outline around a dark bezel on a darkened room does not close (on
# ``bench.screen_photos`` seeds 0-2, the shown photo was inside a quad or frame on 39 of the 54
# screens at 35% of the canvas; with 25 / 75 and 12 / 36 as well on 50, see docs/recall.md)
CANNY = ((50, 150), (25, 75), (12, 36))
# A contour that is no quad (its outline has a gap, or an edge inside the picture touches it)
# is taken by its convex hull where the hull is a quad whose every side runs along edge pixels
# for at least this share of its length
SUPPORT = 0.8
# The picture framed inside each of this many of the largest quads, seen head-on, is one more
# region: a letterboxed photo's own outline merges with its monitor's (only the monitor's quad
# closes), and the monitor's box is ~2x the photo's, mostly bezel, bars and room
INNER_FROM = 2


def _cv2() -> Any:
    import cv2

    return cv2


@dataclass(frozen=True)
class Quad:
    """A picture seen at an angle: its bounding box and its corners (fractions of the image,
    clockwise from the top-left; the region is embedded seen head-on through them)."""

    box: Box
    corners: np.ndarray


def quad_boxes(image: Image.Image) -> list[Box]:
    """The bounding boxes of ``quads(image)``."""
    return [quad.box for quad in quads(image)]


def quads(image: Image.Image) -> list[Quad]:
    """Up to ``MAX_QUADS`` convex quadrilaterals in ``image`` that a flat picture seen at an
    angle makes, largest first, then the picture framed inside each of the ``INNER_FROM``
    largest (``picture_inside``)."""
    cv2 = _cv2()
    gray = image.convert("L")
    scale = WORK_SIDE / max(gray.size)
    if scale < 1:
        gray = gray.resize((max(1, round(gray.width * scale)), max(1, round(gray.height * scale))))
    pixels = np.asarray(gray, np.uint8)
    h, w = pixels.shape
    if min(h, w) < 16:
        return []
    found: list[tuple[float, Quad]] = []
    for low, high in CANNY:
        edges = cv2.dilate(cv2.Canny(pixels, low, high), np.ones((3, 3), np.uint8))
        found += _quads(edges)
    kept: list[Quad] = []
    for _, quad in sorted(found, key=lambda f: -f[0]):
        if all(not _same(quad.box, other.box) for other in kept):
            kept.append(quad)
            if len(kept) == MAX_QUADS:
                break
    for quad in kept[:INNER_FROM]:
        inner = picture_inside(image, quad.corners)
        if inner is not None and all(not _same(inner.box, other.box) for other in kept):
            kept.append(inner)
    return kept


def head_on(image: Image.Image, corners: np.ndarray) -> Image.Image:
    """The quad ``corners`` (fractions of ``image``, clockwise from the top-left) of ``image``
    seen head-on: a rectangle as wide and as high as its longer opposite sides."""
    cv2 = _cv2()
    width, height = image.size
    source = (corners * (width, height)).astype(np.float32)
    sides = np.hypot(*(np.roll(source, -1, axis=0) - source).T)  # top, right, bottom, left
    rw, rh = max(1, round(max(sides[0], sides[2]))), max(1, round(max(sides[1], sides[3])))
    target = np.array([[0, 0], [rw, 0], [rw, rh], [0, rh]], np.float32)
    warp = cv2.getPerspectiveTransform(source, target)
    flat = cv2.warpPerspective(np.asarray(image.convert("RGB")), warp, (rw, rh))
    return Image.fromarray(flat)


def _quads(edges: np.ndarray) -> list[tuple[float, Quad]]:
    """(area, quad: fractions of the edge map) of the plausible quads one edge map's contours
    outline."""
    cv2 = _cv2()
    h, w = edges.shape
    least = MIN_FRACTION * min(h, w)
    found: list[tuple[float, Quad]] = []
    for contour in cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)[0]:
        x, y, bw, bh = cv2.boundingRect(contour)
        if bw < least or bh < least or bw * bh >= MAX_AREA * w * h:
            continue
        polygon = _polygon(contour)
        hulled = len(polygon) != 4 or not cv2.isContourConvex(polygon)
        if hulled:  # an outline with a gap or a spur: its hull, if the edges trace it
            polygon = _polygon(cv2.convexHull(contour))
            if len(polygon) != 4:
                continue
        quad = _clockwise(polygon.reshape(4, 2).astype(np.float64))
        if not plausible_quad(quad) or (hulled and edge_support(edges, quad) < SUPPORT):
            continue
        box = (x / w, y / h, (x + bw) / w, (y + bh) / h)
        found.append((float(cv2.contourArea(polygon)), Quad(box, quad / (w, h))))
    return found


def picture_inside(image: Image.Image, corners: np.ndarray) -> Quad | None:
    """The best picture ``framed_boxes`` finds in the quad ``corners`` (fractions of ``image``,
    clockwise from the top-left) seen head-on, that is not the quad itself (under
    ``NESTED_AREA`` of it): the photo a monitor shows between letterbox bars, whose own outline
    merges with the monitor's. None where there is none."""
    cv2 = _cv2()
    flat = head_on(image, corners)
    rw, rh = flat.size
    if min(rw, rh) < 16:
        return None
    width, height = image.size
    target = np.array([[0, 0], [rw, 0], [rw, rh], [0, rh]], np.float32)
    back = cv2.getPerspectiveTransform(target, (corners * (width, height)).astype(np.float32))
    for x0, y0, x1, y1 in framed_boxes(flat):
        if (x1 - x0) * (y1 - y0) >= NESTED_AREA:
            continue  # the screen inside the bezel: the quad again
        frame = np.array(
            [[[x0 * rw, y0 * rh], [x1 * rw, y0 * rh], [x1 * rw, y1 * rh], [x0 * rw, y1 * rh]]],
            np.float32,
        )
        seen = cv2.perspectiveTransform(frame, back)[0] / np.array([width, height], np.float32)
        (bx0, by0), (bx1, by1) = seen.min(axis=0), seen.max(axis=0)
        return Quad((float(bx0), float(by0), float(bx1), float(by1)), seen.astype(np.float64))
    return None


def _polygon(contour: np.ndarray) -> np.ndarray:
    cv2 = _cv2()
    return cv2.approxPolyDP(contour, APPROX * cv2.arcLength(contour, True), True)  # type: ignore[no-any-return]


def edge_support(edges: np.ndarray, quad: np.ndarray) -> float:
    """The least share, over the quad's four sides, of a side's pixels that are edge pixels."""
    h, w = edges.shape
    least = 1.0
    for a, b in zip(quad, np.roll(quad, -1, axis=0), strict=True):
        t = np.linspace(0.0, 1.0, max(2, round(float(np.hypot(*(b - a))))))[:, None]
        points = np.rint(a * (1 - t) + b * t).astype(np.intp)
        x, y = np.clip(points[:, 0], 0, w - 1), np.clip(points[:, 1], 0, h - 1)
        least = min(least, float(np.count_nonzero(edges[y, x]) / len(t)))
    return least


def _same(box: Box, larger: Box) -> bool:
    """Whether ``box`` is ``larger`` found again: most of it inside, and not a picture nested in
    it (a shown photo inside its monitor's outline: under ``NESTED_AREA`` of its area)."""
    if shared_area(box, larger) < MAX_OVERLAP:
        return False
    return _area(box) >= NESTED_AREA * _area(larger)


def _area(box: Box) -> float:
    return (box[2] - box[0]) * (box[3] - box[1])


def _clockwise(quad: np.ndarray) -> np.ndarray:
    """The quad's corners from the top-left one, clockwise on the image (y down)."""
    centre = quad.mean(axis=0)
    order = np.argsort(np.arctan2(quad[:, 1] - centre[1], quad[:, 0] - centre[0]))
    quad = quad[order]
    start = int(np.argmin(quad.sum(axis=1)))  # the top-left corner: smallest x + y
    return np.roll(quad, -start, axis=0)


def pictures_at_an_angle(image: Image.Image, frames: list[Box]) -> list[Quad]:
    """``quads`` of ``image`` that are none of ``frames`` found again (fractions, the
    axis-aligned pictures found already; a picture nested in one is kept, as in ``_same``)."""
    return [q for q in quads(image) if all(not _same(q.box, f) for f in frames)]
