"""A pair a region nominated is refitted on its best region's crop, then, where that finds no
copy, on the best region of the other kind (``RegionHit.other_box``, ``Pair.other_region``):
a blurred clock at 50% of a page keeps 11 inliers on its frame's crop and 12 on a window's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.match import verify_pass
from splitaudit.indexer.match.geometry import GeometricMatch
from splitaudit.indexer.match.inset_candidates import (
    GRID_REGIONS,
    RegionVectors,
    region_candidates,
    region_fraction,
)
from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.thresholds import thresholds_for_model

Box = tuple[float, float, float, float]
FRAME: Box = (0.1, 0.4, 0.5, 0.9)
WINDOW = region_fraction(6)


def test_each_hit_carries_the_best_box_of_the_other_kind() -> None:
    # one large test image: the nine grid windows, then two frames
    grids = GRID_REGIONS
    boxes = np.asarray([region_fraction(k) for k in range(grids)] + [FRAME, (0, 0, 0.3, 0.3)])
    regions = RegionVectors(np.zeros(len(boxes), np.int64), np.zeros((len(boxes), 4)), boxes)
    scores = np.full((len(boxes), 2), 0.3, np.float32)
    ids = np.tile(np.asarray([[7, 8]]), (len(boxes), 1))
    scores[6, 0], scores[grids, 0] = 0.93, 0.99  # item 7: window 6, then the first frame
    scores[2, 1] = 0.8  # item 8: a window only

    def search(vectors: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        return scores[:, :k], ids[:, :k]

    found = region_candidates(search, regions, floor=0.5)
    clock = found[(0, 7)]
    assert clock.region == grids and clock.box == pytest.approx(FRAME)
    assert clock.other_box == pytest.approx(WINDOW)
    assert found[(0, 8)].box == pytest.approx(region_fraction(2))
    assert found[(0, 8)].other_box is None  # no frame came close to it
    # the frame best for one, a window best for the other: reversed, the window leads
    scores[grids, 0] = 0.9
    flipped = region_candidates(search, regions, floor=0.5)[(0, 7)]
    assert flipped.box == pytest.approx(WINDOW) and flipped.other_box == pytest.approx(FRAME)


def _fit(inliers: int) -> GeometricMatch:
    return GeometricMatch(inliers=inliers, matches=inliers + 10)


def test_the_other_region_is_refitted_only_where_the_best_one_shows_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.png"
    Image.new("RGB", (960, 720), (240, 240, 240)).save(page)
    th = thresholds_for_model(None)
    # what each region's crop fits, per corpus item: 11 on the frame for item 1, 12 on its
    # window; item 2 a copy on its frame already; item 3 nothing on either
    fits = {(1, FRAME): 11, (1, WINDOW): th.geometry_inliers, (2, FRAME): 30, (3, FRAME): 5}
    fits[(3, WINDOW)] = 6
    tried: list[tuple[int, Box]] = []

    def refit(pairs, box_of, full, geometric, load, digests) -> None:  # type: ignore[no-untyped-def]
        assert full.size == (960, 720)
        for p in pairs:
            tried.append((p.item_id, box_of(p)))
            p.geometry = _fit(fits[(p.item_id, box_of(p))])

    monkeypatch.setattr(verify_pass, "_refit_regions", refit)
    pairs = [
        Pair(row=0, item_id=i, cosine=0.3, region_cosine=0.9, region=FRAME, other_region=WINDOW)
        for i in (1, 2, 3)
    ]
    pairs[1].other_region = None
    for p in pairs:
        p.geometry = _fit(3)
    locator = {"kind": "file", "path": str(page)}
    verify_pass._refit_insets([], pairs, locator, None, lambda i: None, {}, th)  # type: ignore[arg-type]
    assert tried == [(1, FRAME), (2, FRAME), (3, FRAME), (1, WINDOW), (3, WINDOW)]
    assert [p.geometry.inliers for p in pairs if p.geometry] == [th.geometry_inliers, 30, 6]
