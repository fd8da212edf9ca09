"""A pair a region nominated is refitted on its best region's crop, then, where that finds no
copy, on the best region of the other kind (``RegionHit.other_box``, ``Pair.other_region``):
a blurred clock at 50% of a page keeps 11 inliers on its frame's crop and 12 on a window's.
Where a crop finds the inset but small (a text page at 30% keeps 6 inliers in a window's
crop), the crop around the box that fit drew follows (~190). A fit refused as a shared
overlay on the reduced decode is judged again on the crop, beside the same partners."""

from __future__ import annotations

from dataclasses import replace
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

    def refit(pairs, box_of, full, geometric, load, digests, partners=()) -> None:  # type: ignore[no-untyped-def]
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


class _Geometric:
    """The geometric step, as far as the refits use it: each crop it is asked to match, and a
    copy (``inliers``) for every corpus item."""

    def __init__(self, inliers: int) -> None:
        self.inliers = inliers
        self.crops: list[tuple[tuple[int, int], list[int]]] = []

    def match(self, crop: Image.Image, ids: list[int], load: Any, digests: Any) -> list[Any]:
        self.crops.append((crop.size, list(ids)))
        # the inset fills the crop but its margins (MARGIN of the box on each side)
        inner = (0.15 / 1.3, 0.15 / 1.3, 1.15 / 1.3, 1.15 / 1.3)
        return [replace(_inset(self.inliers, inner), scale=1.3) for _ in ids]


def _inset(inliers: int, box: Box = (0.3, 0.5, 0.5, 0.75)) -> GeometricMatch:
    """A plausible fit of a corpus image shown at ``box`` of the test image."""
    return GeometricMatch(inliers=inliers, matches=inliers + 10, scale=3.0, test_box=box)


def _page(tmp_path: Path) -> dict[str, str]:
    page = tmp_path / "page.png"
    Image.new("RGB", (1280, 800), (240, 240, 240)).save(page)
    return {"kind": "file", "path": str(page)}


def test_a_region_crop_that_finds_the_inset_small_is_followed_by_its_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a text page at 20 x 25% of the page: the window's crop shows it small, 6 inliers
    th = thresholds_for_model(None)
    box = (0.3, 0.5, 0.5, 0.75)

    def refit(pairs, box_of, full, geometric, load, digests, partners=()) -> None:  # type: ignore[no-untyped-def]
        for p in pairs:
            p.geometry = _inset(6, box)

    monkeypatch.setattr(verify_pass, "_refit_regions", refit)
    pair = Pair(row=0, item_id=1, cosine=0.3, region_cosine=0.8, region=WINDOW)
    pair.geometry = GeometricMatch(inliers=2, matches=9)
    geometric = _Geometric(inliers=190)
    verify_pass._refit_insets([], [pair], _page(tmp_path), geometric, lambda i: None, {}, th)  # type: ignore[arg-type]
    # one more crop, around the box widened by MARGIN (0.15 of its sides): 332 x 260 px
    assert geometric.crops == [((332, 260), [1])]
    assert pair.geometry is not None and pair.geometry.is_copy(th.geometry_inliers)
    assert pair.geometry.test_box == pytest.approx(box, abs=0.01)


def test_a_fit_refused_as_an_overlay_is_judged_again_on_the_crop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    th = thresholds_for_model(None)
    refused = replace(_inset(5), shared=5, shared_with=1)  # an overlay pair on the reduced decode
    assert refused.vetoes
    seen: list[list[int]] = []

    def refit_to(inliers: int):  # type: ignore[no-untyped-def]
        def refit(pairs, box_of, full, geometric, load, digests, partners=()) -> None:  # type: ignore[no-untyped-def]
            seen.append(list(partners))
            for p in pairs:
                p.geometry = _inset(inliers)

        return refit

    def audit(inliers: int) -> list[Pair]:
        monkeypatch.setattr(verify_pass, "_refit_regions", refit_to(inliers))
        pairs = [
            Pair(row=0, item_id=i, cosine=0.3, region_cosine=0.9, region=FRAME) for i in (1, 2)
        ]
        for p in pairs:
            p.geometry = refused
        partner = Pair(row=0, item_id=3, cosine=0.5)  # the other fit of the overlay pair
        partner.geometry = replace(_inset(5), shared=3, shared_with=1, box=(0.0, 0.0, 1.0, 1.0))
        chosen = [*pairs, partner]
        geometric = _Geometric(inliers=5)  # the box refit finds no more
        verify_pass._refit_insets([], chosen, _page(tmp_path), geometric, lambda i: None, {}, th)  # type: ignore[arg-type]
        return pairs

    # the crop shows a copy: the refusal on the reduced decode is lifted
    assert all(p.geometry == _inset(th.geometry_inliers) for p in audit(th.geometry_inliers))
    # every fit that took part in an overlay pair is matched on the crop too
    assert seen[0] == [1, 2, 3]
    # the crop finds no copy either: the pair keeps its refusal, not the crop's open fit
    assert all(p.geometry == refused for p in audit(8))


def test_each_region_crop_is_matched_against_its_pairs_and_the_overlay_partners() -> None:
    full = Image.new("RGB", (1280, 800), (240, 240, 240))
    pairs = [Pair(row=0, item_id=i, cosine=0.3, region_cosine=0.9, region=FRAME) for i in (1, 2)]
    geometric = _Geometric(inliers=30)
    verify_pass._refit_regions(
        pairs,
        lambda p: p.region,
        full,
        geometric,  # type: ignore[arg-type]
        lambda i: None,
        {},
        partners=[5, 2, 5],
    )
    # one crop for the region: its two pairs first, then the partner not among them, once
    assert [ids for _, ids in geometric.crops] == [[1, 2, 5]]
    assert all(p.geometry is not None and p.geometry.inliers == 30 for p in pairs)
