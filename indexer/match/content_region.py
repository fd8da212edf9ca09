"""The content of a pair whose geometric fit was refused as an overlay, embedded on its own.

A frame, window chrome or caption bands drawn around two unrelated photos can bring their
whole-image embeddings above ``semantic_cosine``: the overlay, not the photos, is then what is
similar (issue 22). When the geometric step refuses such a fit (``GeometricMatch.vetoes`` or
``overlay_only``) with the two images aligned as they are (``aligned``: one template over both),
the inliers sit on the overlay, so the region of the images away from them is the content:
``content_box`` peels the outer rows and columns of an 8 x 8 grid of the corpus image that hold
inliers until (almost) none is left, and ``content_cosine`` embeds that same box of both images
(aligned, so the same fractions on both sides) with the split's embedder. The pair stays
semantic only if that content cosine is at or above ``semantic_cosine`` too
(``Thresholds.semantic_mask``). Where the inliers spread over the whole image (a tiled
watermark) no content box is left and the pair keeps its whole-image verdict (None here): the
overlay covers the photo, there is no content-only view of it to embed, and the whole-image
embedding is dominated by the photo under a semi-transparent pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.match.geometry import Box, GeometricMatch, working_size

GRID = 8  # cells per side the inliers are counted in
# The content box must keep at least this share of each side (else: no content region).
MIN_SIDE = 0.35
# Inliers that may stay inside the content box: a stray match on the photo itself.
STRAY = 0.1

Embed = Callable[[Sequence[Image.Image]], npt.NDArray[np.float32]]


def needs_content(match: GeometricMatch | None) -> bool:
    """Whether a pair's fit was refused as an overlay at the identity alignment (the pairs whose
    semantic verdict ``content_cosine`` decides)."""
    if match is None or match.inlier_points is None or not match.aligned:
        return False
    return match.vetoes or match.overlay_only


def content_box(
    points: npt.NDArray[np.float32], width: int, height: int, grid: int = GRID
) -> Box | None:
    """The box (fractions of the image) left after peeling the outer grid rows and columns that
    hold inliers (``points``, px of a ``width`` x ``height`` image), most inliers first, until at
    most ``STRAY`` of them are inside; None when it would be under ``MIN_SIDE`` of a side."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    counts = np.zeros((grid, grid), np.int64)
    if len(pts):
        gx = np.clip((pts[:, 0] / width * grid).astype(int), 0, grid - 1)
        gy = np.clip((pts[:, 1] / height * grid).astype(int), 0, grid - 1)
        np.add.at(counts, (gy, gx), 1)
    allowed = STRAY * len(pts)
    x0, y0, x1, y1 = 0, 0, grid, grid
    smallest = MIN_SIDE * grid
    while counts[y0:y1, x0:x1].sum() > allowed:
        inside = counts[y0:y1, x0:x1]
        edges = {
            "top": inside[0].sum(),
            "bottom": inside[-1].sum(),
            "left": inside[:, 0].sum(),
            "right": inside[:, -1].sum(),
        }
        edge = max(edges, key=lambda e: edges[e])
        if edges[edge] == 0:
            return None  # inliers in the middle only: not an overlay around the content
        if edge == "top":
            y0 += 1
        elif edge == "bottom":
            y1 -= 1
        elif edge == "left":
            x0 += 1
        else:
            x1 -= 1
        if x1 - x0 < smallest or y1 - y0 < smallest:
            return None
    return (x0 / grid, y0 / grid, x1 / grid, y1 / grid)


def _crop(image: Image.Image, box: Box) -> Image.Image:
    w, h = image.size
    return image.convert("RGB").crop(
        (round(box[0] * w), round(box[1] * h), round(box[2] * w), round(box[3] * h))
    )


def content_cosine(
    query: Image.Image, corpus: Image.Image, match: GeometricMatch, embed: Embed
) -> float | None:
    """Cosine of the two images' content region (``content_box`` of the fit's inliers, the
    same box on both sides) with ``embed`` (rows L2-normalised); None where the fit is not one
    refused as an overlay at the identity alignment (``needs_content``) or no box is left."""
    if not needs_content(match):
        return None
    assert match.inlier_points is not None
    box = content_box(match.inlier_points, *working_size(*corpus.size))
    if box is None:
        return None
    vectors = np.asarray(embed([_crop(query, box), _crop(corpus, box)]), dtype=np.float64)
    return float(np.dot(vectors[0], vectors[1]))
