"""Pictures seen at an angle: the quadrilaterals a photo of a screen or a print shows.

``framed_regions`` finds pictures by their straight horizontal and vertical edges; a monitor
photographed 10-30 degrees off shows its picture as a quadrilateral whose edges are slanted,
and none of the axis-aligned frames fits it (of ``bench.screen_photos``' 18 screens at 35% of
the canvas on seed 1, a frame was found on two, both at yaw 3). A grid window
45% of the side around such a screen is mostly room: 21 of 54 such screens at 35% were missed,
most of them nominated by nothing (docs/recall.md: with the shown photo's box as a region, all
seven such misses of seed 0 that fit at full resolution were near).

``quad_boxes`` finds them as a document scanner does: Canny edges of the reduced image,
closed by a 3 x 3 dilation, their outer contours approximated by polygons (``APPROX`` of the
perimeter), and the convex four-cornered ones kept whose corners a flat picture seen at an
angle has (``geometry.plausible_quad``), each at least ``MIN_FRACTION`` of the shorter side
on both axes and under ``MAX_AREA`` of the image. Their bounding boxes are regions like
frames: each is embedded and nominates, and the geometric step on its crop (in perspective
where it needs: ``geometry._perspective``) decides.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from splitaudit.indexer.match.framed_regions import shared_area
from splitaudit.indexer.match.geometry import plausible_quad

WORK_SIDE = 512  # long side (px) the image is reduced to
MIN_FRACTION = 0.15  # each side of the box, of the image's shorter side (as for frames)
MAX_AREA = 0.8  # boxes covering this share of the image or more are the image itself
APPROX = 0.03  # polygon approximation tolerance, of the contour's perimeter
MAX_QUADS = 4  # kept per image, largest first; each is one more embedding
MAX_OVERLAP = 0.6  # a box sharing this much of the smaller one's area with a kept one: the same
CANNY = (50, 150)  # Canny's hysteresis thresholds (grey levels)


def _cv2() -> Any:
    import cv2

    return cv2


def quad_boxes(image: Image.Image) -> list[tuple[float, float, float, float]]:
    """Up to ``MAX_QUADS`` bounding boxes (x0, y0, x1, y1 as fractions of ``image``) of convex
    quadrilaterals in ``image`` that a flat picture seen at an angle makes, largest first."""
    cv2 = _cv2()
    gray = image.convert("L")
    scale = WORK_SIDE / max(gray.size)
    if scale < 1:
        gray = gray.resize((max(1, round(gray.width * scale)), max(1, round(gray.height * scale))))
    pixels = np.asarray(gray, np.uint8)
    h, w = pixels.shape
    if min(h, w) < 16:
        return []
    edges = cv2.dilate(cv2.Canny(pixels, *CANNY), np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    least = MIN_FRACTION * min(h, w)
    found: list[tuple[float, tuple[int, int, int, int]]] = []
    for contour in contours:
        x, y, bw, bh = cv2.boundingRect(contour)
        if bw < least or bh < least or bw * bh >= MAX_AREA * w * h:
            continue
        polygon = cv2.approxPolyDP(contour, APPROX * cv2.arcLength(contour, True), True)
        if len(polygon) != 4 or not cv2.isContourConvex(polygon):
            continue
        quad = polygon.reshape(4, 2).astype(np.float64)
        if not plausible_quad(_clockwise(quad)):
            continue
        found.append((float(cv2.contourArea(polygon)), (x, y, x + bw, y + bh)))
    kept: list[tuple[int, int, int, int]] = []
    for _, box in sorted(found, reverse=True):
        if all(shared_area(box, other) < MAX_OVERLAP for other in kept):
            kept.append(box)
            if len(kept) == MAX_QUADS:
                break
    return [(x0 / w, y0 / h, x1 / w, y1 / h) for x0, y0, x1, y1 in kept]


def _clockwise(quad: np.ndarray) -> np.ndarray:
    """The quad's corners from the top-left one, clockwise on the image (y down)."""
    centre = quad.mean(axis=0)
    order = np.argsort(np.arctan2(quad[:, 1] - centre[1], quad[:, 0] - centre[0]))
    quad = quad[order]
    start = int(np.argmin(quad.sum(axis=1)))  # the top-left corner: smallest x + y
    return np.roll(quad, -start, axis=0)


def pictures_at_an_angle(
    image: Image.Image, frames: list[tuple[float, float, float, float]]
) -> list[tuple[float, float, float, float]]:
    """``quad_boxes`` of ``image`` that no box of ``frames`` (fractions, the axis-aligned
    pictures found already) covers (``MAX_OVERLAP``)."""
    return [q for q in quad_boxes(image) if all(shared_area(q, f) < MAX_OVERLAP for f in frames)]
