"""Candidates for a corpus image shown inside a larger test image: a screenshot, collage, slide.

A corpus photo inset at 30% of a screenshot's side is a small part of it: the test image's
global embedding and pHash describe the page around it, so neither nominates the photo (its
cosine to the inset photo: 0.17-0.48 on ``bench.accuracy``'s screenshot canvas, below
``candidate_cosine``). The split's ingestion therefore also embeds a few *regions* of every
large test image (``region_boxes``: a 3 x 3 grid of windows 45% of the side, overlapping), and
the audit searches the corpus index with them (``region_candidates``): a region holding the
inset reaches cosine 0.67-0.87 against its source. A region only nominates a pair; the
geometric step (``splitaudit.indexer.match.geometric_tier``) decides, and it draws the inset's
box on the test image (``test_box`` in the evidence).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from PIL import Image

# Test images whose shorter side is at least this many px get region embeddings (a 30% inset
# of a smaller image has too few pixels for the geometric match; and every region costs an
# embedding).
INSET_MIN_SIDE = 400
REGION_SIDE = 0.45  # of the test image's width and height
REGION_STEPS = 3  # windows per axis (starts at 0, 0.275, 0.55 of the side)
# Corpus items nominated per test image by its regions (best region cosine first).
REGION_TOP_K = 3

VectorSearch = Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
]


@dataclass(frozen=True)
class RegionVectors:
    """Embeddings of regions of a split's large images: ``rows[i]`` is the split row region
    ``i`` belongs to, ``vectors[i]`` its L2-normalised embedding."""

    rows: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.rows)

    @staticmethod
    def concat(parts: Sequence[RegionVectors], dim: int) -> RegionVectors:
        """One ``RegionVectors`` of several batches' (in row order)."""
        if not parts:
            return RegionVectors(np.zeros(0, np.int64), np.zeros((0, dim), np.float32))
        return RegionVectors(
            np.concatenate([p.rows for p in parts]), np.concatenate([p.vectors for p in parts])
        )


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


def region_crops(
    images: Sequence[Image.Image], first_row: int, sizes: Sequence[tuple[int, int]]
) -> tuple[list[Image.Image], npt.NDArray[np.int64]]:
    """The regions to embed of a batch of split images (rows ``first_row``, ``first_row + 1``,
    ...), and the row each belongs to. ``sizes`` are the files' own (width, height): the
    decodes in ``images`` may be reduced, the regions are the same fractions of them."""
    crops: list[Image.Image] = []
    rows: list[int] = []
    for n, (image, (width, height)) in enumerate(zip(images, sizes, strict=True)):
        if min(width, height) < INSET_MIN_SIDE:
            continue
        for box in region_boxes(image.width, image.height, gate=False):
            crops.append(image.crop(box))
            rows.append(first_row + n)
    return crops, np.asarray(rows, np.int64)


def region_candidates(
    search: VectorSearch, regions: RegionVectors, floor: float, k: int = REGION_TOP_K
) -> dict[tuple[int, int], float]:
    """(split row, corpus item id) -> the best region cosine, for the ``k`` corpus items each
    large test image's regions come closest to, at ``floor`` or above."""
    best: dict[tuple[int, int], float] = {}
    if not len(regions):
        return best
    scores, ids = search(np.ascontiguousarray(regions.vectors), k)
    for row, row_scores, row_ids in zip(regions.rows.tolist(), scores, ids, strict=True):
        for score, item_id in zip(row_scores.tolist(), row_ids.tolist(), strict=True):
            if item_id >= 0 and score >= floor:
                key = (int(row), int(item_id))
                best[key] = max(best.get(key, -1.0), float(score))
    per_row: dict[int, list[tuple[float, int]]] = {}
    for (row, item_id), score in best.items():
        per_row.setdefault(row, []).append((score, item_id))
    kept: dict[tuple[int, int], float] = {}
    for row, found in per_row.items():
        for score, item_id in sorted(found, reverse=True)[:k]:
            kept[(row, item_id)] = score
    return kept
