"""The low-resolution alignment's coarse step, all candidates of a query at once: OpenCV's
normalised cross-correlation pair by pair, the same best positions; flat windows and flat
templates nominate nothing."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from helpers.thumb_edits import rescraped, square_cut
from PIL import Image

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.low_res_align import (
    ALIGNED_NEAR,
    COARSE_FLOOR,
    MAX_OFFSET,
    PAD,
    WINDOW,
    _band_pass,
    aligned_score,
    aligned_scores,
    prepare_query,
)
from splitaudit.indexer.match.low_res_coarse import CoarseWindows, coarse_matches
from splitaudit.indexer.match.verify import THUMB_SIZE, verify_thumbnail

LO = (THUMB_SIZE - WINDOW) // 2


def _templates(thumbs: np.ndarray) -> np.ndarray:
    bands = _band_pass(thumbs.astype(np.float32))
    return np.ascontiguousarray(bands[:, LO : LO + WINDOW, LO : LO + WINDOW])


def _opencv_coarse(bands, template: np.ndarray) -> tuple[float, float, int, int]:
    """The coarse search as it ran pair by pair: matchTemplate per scale, allowed centres only."""
    best, scale, bx, by = -2.0, 1.0, 0, 0
    for s, band in bands:
        found = cv2.matchTemplate(band, template, cv2.TM_CCOEFF_NORMED)
        offsets = (np.arange(found.shape[0]) - PAD + WINDOW / 2) / s - THUMB_SIZE / 2
        near = np.abs(offsets) <= MAX_OFFSET * THUMB_SIZE
        allowed = np.where(near[:, None] & near[None, :], found, -2.0).astype(np.float32)
        _, value, _, (x, y) = cv2.minMaxLoc(allowed)
        if value > best:
            best, scale, bx, by = float(value), s, x, y
    return best, scale, bx, by


@pytest.fixture(scope="module")
def tiles() -> list[Image.Image]:
    """32-px tiles of three photos, cut at several places and sides, re-scraped."""
    out = []
    for name in ("astronaut", "coffee", "chelsea"):
        photo = sample_photo(name)
        w, h = photo.size
        for k in range(6):
            cx, cy = w * (0.3 + 0.08 * k), h * (0.35 + 0.05 * k)
            out.append(rescraped(square_cut(photo, cx, cy, 90 + 12 * k)))
    return out


def test_the_batched_coarse_step_is_opencvs_pair_by_pair(tiles: list[Image.Image]) -> None:
    thumbs = np.stack([verify_thumbnail(t) for t in tiles])
    templates = _templates(thumbs)
    compared = 0
    for query in tiles[::2]:
        prepared = prepare_query(query)
        found = coarse_matches(prepared.windows, templates)
        for i, template in enumerate(templates):
            score, scale, x, y = _opencv_coarse(prepared.bands, template)
            assert found.score[i] == pytest.approx(score, abs=1e-4)
            assert (float(found.scale[i]), int(found.x[i]), int(found.y[i])) == (scale, x, y)
            compared += 1
    assert compared == 9 * len(tiles)
    # the copies and the tiles themselves do reach the refinement
    assert (coarse_matches(prepare_query(tiles[0]).windows, templates[:1]).score >= 0.99).all()


def test_flat_windows_and_flat_templates_nominate_nothing(tiles: list[Image.Image]) -> None:
    """A plain area's correlation is a ratio of two rounding errors (OpenCV scored such windows of
    a plain sky 0.65-1.0 against unrelated thumbnails in a dedup of real thumbnails): 0 there,
    even where the rounding error happens to have the template's shape; a flat template
    matches nothing."""
    thumbs = np.stack([verify_thumbnail(t) for t in tiles])
    templates = _templates(thumbs)
    shape = (templates[0] - templates[0].mean()).reshape(1, -1)
    for norm, expected in ((1e-4, 0.0), (1e-2 * 1.01, 1.0)):
        centred = (shape / np.linalg.norm(shape) * norm).astype(np.float32)
        windows = CoarseWindows(
            centred,
            np.array([norm], np.float32),
            np.ones(1),
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
        )
        assert coarse_matches(windows, templates[:1]).score[0] == pytest.approx(expected, abs=1e-3)
    sky = np.full((48, 48, 3), (120, 160, 210), np.uint8)
    sky[:, :6] = (20, 20, 20)  # a dark strip: the query has texture at one edge only
    assert coarse_matches(prepare_query(Image.fromarray(sky)).windows, templates).score.max() < (
        COARSE_FLOOR
    )
    plain = np.full((1, THUMB_SIZE, THUMB_SIZE), 128, np.uint8)
    assert coarse_matches(prepare_query(tiles[0]).windows, _templates(plain)).score[0] == -2.0
    assert aligned_scores(tiles[0], plain)[0] == -1.0


def test_a_batch_scores_each_pair_as_alone(tiles: list[Image.Image]) -> None:
    photo = sample_photo("astronaut")
    source = verify_thumbnail(square_cut(photo, 226.2, 383.3, 128))
    copy = prepare_query(rescraped(square_cut(photo, 226.2 + 14.8, 383.3 + 5.6, 128 / 1.09)))
    stack = np.concatenate([np.stack([verify_thumbnail(t) for t in tiles]), source[None]])
    batch = aligned_scores(copy, stack)
    assert batch[-1] >= ALIGNED_NEAR
    assert batch.tolist() == [aligned_score(copy, t) for t in stack]
