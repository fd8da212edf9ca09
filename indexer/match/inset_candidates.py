"""Candidates for a corpus image shown inside a larger test image: a screenshot, collage, slide.

A corpus photo inset at 30% of a screenshot's side is a small part of it: the test image's
global embedding and pHash describe the page around it, so neither nominates the photo (its
cosine to the inset photo: 0.17-0.48 on ``bench.recall``'s screenshot canvas, below
``candidate_cosine``). The split's ingestion therefore also embeds a few *regions* of every
large test image (``region_boxes``: a 3 x 3 grid of windows 45% of the side, overlapping), cut
from a decode of ``REGION_DECODE_SIDE`` px (``region_decode``: the ingestion's 256-px decode
leaves a 30% inset some 77 px, too blurry for the model), and the audit searches the corpus
index with them (``region_candidates``): a region holding a 30% inset reaches cosine 0.41-0.78
against its source (0.27-0.70 cut from the 256-px decode). After the grid come the pictures
the image frames (``framed_regions``: a photo pasted into a page, a slide, a collage cell),
cut along their own edges: a texture inset at 30% is mostly page in every window (cosine
0.23-0.31 to its source), itself in its frame. A region only nominates a pair; the
geometric step (``splitaudit.indexer.match.geometric_tier``) decides, and it draws the inset's
box on the test image (``test_box`` in the evidence). A test image under ``INSET_MIN_SIDE`` but
at least ``FRAMES_MIN_SIDE`` (a page at thumbnail or preview size) gets its framed pictures
and those seen at an angle, not the grid.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from PIL import Image

# Test images whose shorter side is at least this many px get the whole set of regions: the
# grid's nine windows, the framed pictures and the quadrilaterals (every region costs an
# embedding).
INSET_MIN_SIDE = 400
# Test images from this shorter side up to ``INSET_MIN_SIDE`` (a web page at thumbnail or
# preview size: 640 x 360, 480 x 300; a photo of a screen at that size) get the pictures they
# frame and those they show at an angle as regions, not the grid: the two searches cost
# ~15-20 ms and find nothing on most photos, where a grid would embed nine windows of every
# one.
FRAMES_MIN_SIDE = 200
REGION_SIDE = 0.45  # of the test image's width and height
REGION_STEPS = 3  # windows per axis (starts at 0, 0.275, 0.55 of the side)
GRID_REGIONS = REGION_STEPS * REGION_STEPS  # a row's first regions; its frames follow
# Corpus items each region is searched for, and how many of them (best region cosine first,
# corpus images the geometric step can match only) each large test image keeps across its
# regions: on a screenshot every region of the page itself comes close to corpus pictures of
# text, so the inset's source may rank below them; each region's own nearest is kept besides
# (``region_candidates``).
REGION_TOP_K = 8
REGIONS_KEPT = 3
# Long side (px) of the decode regions are cut from: each 45% region is then ~350 px, so the
# model sees it from real pixels (its input is 224 px), not upscaled from the 256-px decode.
REGION_DECODE_SIDE = 768
# A region nominates corpus items down to this much under ``candidate_cosine``: the geometric
# step decides, and at most ``REGION_TOP_K`` per test image are matched. On bench.recall a
# 30% inset's best region reaches 0.41-0.78 against its source.
REGION_COSINE_MARGIN = 0.1

VectorSearch = Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
]


@dataclass(frozen=True)
class RegionVectors:
    """Embeddings of regions of a split's large images: ``rows[i]`` is the split row region
    ``i`` belongs to, ``vectors[i]`` its L2-normalised embedding, ``boxes[i]`` its box
    (x0, y0, x1, y1 as fractions of the test image's width and height)."""

    rows: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    boxes: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.rows)

    def rows_in(self, start: int, stop: int) -> RegionVectors:
        """The regions of split rows ``start`` to ``stop`` (exclusive), rows renumbered from 0."""
        keep = (self.rows >= start) & (self.rows < stop)
        return RegionVectors(self.rows[keep] - start, self.vectors[keep], self.boxes[keep])

    @staticmethod
    def concat(parts: Sequence[RegionVectors], dim: int) -> RegionVectors:
        """One ``RegionVectors`` of several batches' (in row order)."""
        if not parts:
            return RegionVectors(
                np.zeros(0, np.int64), np.zeros((0, dim), np.float32), np.zeros((0, 4), np.float64)
            )
        return RegionVectors(
            np.concatenate([p.rows for p in parts]),
            np.concatenate([p.vectors for p in parts]),
            np.concatenate([p.boxes for p in parts]),
        )


@dataclass(frozen=True)
class RegionHit:
    """A corpus item a region of a test image came close to: the best region's cosine, that
    region's number (its place among the row's regions: ``region_boxes``' order, then its
    frames), its box (fractions of the test image, ``RegionVectors.boxes``) and the best box
    of the other kind."""

    cosine: float
    region: int
    box: tuple[float, float, float, float]
    # the best box of the other kind (a window of the grid when ``box`` is a framed picture,
    # and the reverse), where one came close too: a refit tries it when ``box``'s finds no
    # copy (a blurred clock at 50%: 11 inliers on its frame's crop, 12 on a window's)
    other_box: tuple[float, float, float, float] | None = None


def region_fraction(region: int) -> tuple[float, float, float, float]:
    """Region ``region``'s box (x0, y0, x1, y1) as fractions of the test image's width and
    height (``region_boxes``' order: row by row, ``REGION_STEPS`` per row)."""
    if not 0 <= region < GRID_REGIONS:
        raise ValueError(f"region must be in 0..{GRID_REGIONS - 1}, got {region}")
    starts = np.linspace(0.0, 1.0 - REGION_SIDE, REGION_STEPS)
    x, y = float(starts[region % REGION_STEPS]), float(starts[region // REGION_STEPS])
    return (x, y, x + REGION_SIDE, y + REGION_SIDE)


def region_boxes(width: int, height: int, gate: bool = True) -> list[tuple[int, int, int, int]]:
    """The regions of a ``width`` x ``height`` test image that get embeddings (with ``gate``,
    none when its shorter side is below ``INSET_MIN_SIDE``)."""
    if gate and min(width, height) < INSET_MIN_SIDE:
        return []
    starts = np.linspace(0.0, 1.0 - REGION_SIDE, REGION_STEPS)
    return [
        (
            round(x * width),
            round(y * height),
            round((x + REGION_SIDE) * width),
            round((y + REGION_SIDE) * height),
        )
        for y in starts
        for x in starts
    ]


def region_decode(data: bytes, side: int = REGION_DECODE_SIDE) -> Image.Image:
    """A test image's file decoded for its regions: RGB, oriented like the ingestion's decode,
    the long side reduced to ``side`` (default ``REGION_DECODE_SIDE``; a JPEG decoded at the
    smallest DCT scale that keeps it).
    Raises ``ImageDecodeError`` for bytes that are not a supported image."""
    from splitaudit.indexer.features.decode import decode_image

    image = decode_image(data, pixels_only=True, draft=(side, side)).decoded
    scale = side / max(image.size)
    if scale < 1.0:
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)
    return image


def region_crops(
    images: Sequence[Image.Image],
    first_row: int,
    sizes: Sequence[tuple[int, int]],
    larger: Callable[[int], Image.Image | None] | None = None,
) -> tuple[list[Image.Image], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The regions to embed of a batch of split images (rows ``first_row``, ``first_row + 1``,
    ...), the row each belongs to and its box (fractions of the image): the grid of
    ``region_boxes``, then the pictures the image frames (``framed_regions.framed_boxes``: a
    photo in a screenshot, slide or collage, cut along its own edges) and those it shows at
    an angle (``quad_regions``: a photo of a screen; the crop is its quadrilateral seen
    head-on, the box the quadrilateral's bounding box); under ``INSET_MIN_SIDE`` no grid, and
    nothing under ``FRAMES_MIN_SIDE``. ``sizes`` are the
    files' own (width, height): the decodes in ``images`` may be reduced, the regions are the
    same fractions of them. ``larger(n)``: the batch's ``n``-th image decoded larger
    (``region_decode``), to cut its regions from; where it is absent or returns None, they
    are cut from ``images[n]``."""
    crops: list[Image.Image] = []
    rows: list[int] = []
    boxes: list[tuple[float, float, float, float]] = []
    for n, (small, (width, height)) in enumerate(zip(images, sizes, strict=True)):
        if min(width, height) < FRAMES_MIN_SIDE:
            continue
        image = (larger(n) if larger is not None else None) or small
        for crop, box in image_regions(image, whole=min(width, height) >= INSET_MIN_SIDE):
            crops.append(crop)
            rows.append(first_row + n)
            boxes.append(box)
    return crops, np.asarray(rows, np.int64), np.asarray(boxes, np.float64).reshape(-1, 4)


def image_regions(
    image: Image.Image, whole: bool = True
) -> list[tuple[Image.Image, tuple[float, float, float, float]]]:
    """The regions of one test image's region decode, in ``region_crops``' order, each as
    (its crop as embedded, its box as fractions of the image): the grid's windows, the
    pictures it frames, the pictures it shows at an angle (seen head-on); without ``whole``
    (a test image under ``INSET_MIN_SIDE``), no grid."""
    from splitaudit.indexer.match.framed_regions import framed_boxes
    from splitaudit.indexer.match.quad_regions import head_on, pictures_at_an_angle

    w, h = image.size
    # the grid's boxes as exact fractions (where a refit looks), its crops as embedded
    boxes = region_boxes(w, h, gate=False) if whole else []
    grid = [(image.crop(b), region_fraction(k)) for k, b in enumerate(boxes)]
    frames = framed_boxes(image)
    framed = [(image.crop(_pixels(box, w, h)), box) for box in frames]
    # a picture seen at an angle is embedded seen head-on (on seeds 0-2's 54 screens at 35%
    # of bench.screen_photos' canvas, the largest quad's cosine to the shown photo: mean
    # 0.535 cut out by its box, 0.598 seen head-on); its box is where a refit looks
    angled = [(head_on(image, q.corners), q.box) for q in pictures_at_an_angle(image, frames)]
    return grid + framed + angled


def _pixels(box: tuple[float, float, float, float], w: int, h: int) -> tuple[int, int, int, int]:
    return (round(box[0] * w), round(box[1] * h), round(box[2] * w), round(box[3] * h))


def region_candidates(
    search: VectorSearch,
    regions: RegionVectors,
    floor: float,
    k: int = REGION_TOP_K,
    kept: int = REGIONS_KEPT,
    eligible: Callable[[list[int]], Collection[int]] | None = None,
) -> dict[tuple[int, int], RegionHit]:
    """(split row, corpus item id) -> the best region (``RegionHit``: with the best box of the
    other kind, grid window or frame), for the ``kept`` corpus items each large test image's
    regions come closest to among the ``k`` nearest of each region, at ``floor`` or above (the
    engine passes ``candidate_cosine - REGION_COSINE_MARGIN``), and each region's own nearest
    such item: a page's plain canvas or text comes closer to look-alike corpus pictures
    (0.65-0.78 among 12,000 distractor tiles) than a 30% inset's region to its source
    (0.55-0.64), so ranking across regions alone gave the slots to the page. A row's regions
    are numbered in the order they come in ``regions`` (``region_crops``: the ``REGION_STEPS`` x
    ``REGION_STEPS`` grid in ``region_boxes``' order, then its frames; under
    ``INSET_MIN_SIDE``, no grid). ``eligible(ids)``:
    which of these corpus items may be nominated (the engine: those large enough for the
    geometric step); all where None."""
    best: dict[tuple[int, int], RegionHit] = {}
    if not len(regions):
        return best
    scores, ids = search(np.ascontiguousarray(regions.vectors), k)
    rows = regions.rows.tolist()
    first: dict[int, int] = {}
    for n, row in enumerate(rows):
        first.setdefault(row, n)
    # (split row, corpus item, framed?) -> the best region of that kind (a row under
    # INSET_MIN_SIDE has no grid, its frames and quads numbered from 0: one kind, no other
    # box, whatever it is called)
    of_kind: dict[tuple[int, int, bool], RegionHit] = {}
    for n, (row, row_scores, row_ids) in enumerate(zip(rows, scores, ids, strict=True)):
        region = n - first[row]
        for score, item_id in zip(row_scores.tolist(), row_ids.tolist(), strict=True):
            key = (int(row), int(item_id), region >= GRID_REGIONS)
            if (
                item_id >= 0
                and score >= floor
                and (key not in of_kind or score > of_kind[key].cosine)
            ):
                x0, y0, x1, y1 = (float(v) for v in regions.boxes[n])
                of_kind[key] = RegionHit(float(score), region, (x0, y0, x1, y1))
    for (row, item_id, framed), hit in of_kind.items():
        other = of_kind.get((row, item_id, not framed))
        if (
            other is None
            or hit.cosine > other.cosine
            or (hit.cosine == other.cosine and not framed)
        ):
            best[(row, item_id)] = replace(hit, other_box=other.box if other else None)
    allowed = None if eligible is None else set(eligible(sorted({i for _, i in best})))
    per_row: dict[int, list[tuple[float, int]]] = {}
    for (row, item_id), hit in best.items():
        if allowed is None or item_id in allowed:
            per_row.setdefault(row, []).append((hit.cosine, item_id))
    out: dict[tuple[int, int], RegionHit] = {}
    for row, found in per_row.items():
        for _, item_id in sorted(found, reverse=True)[:kept]:
            out[(row, item_id)] = best[(row, item_id)]
    # and every region's own best: the page's other regions (a plain canvas, lines of text)
    # come closer to look-alike corpus pictures than the inset's region comes to its source
    for row, row_scores, row_ids in zip(rows, scores, ids, strict=True):
        for score, item_id in zip(row_scores.tolist(), row_ids.tolist(), strict=True):
            if item_id >= 0 and score >= floor and (allowed is None or item_id in allowed):
                out[(int(row), int(item_id))] = best[(int(row), int(item_id))]
                break
    return out
