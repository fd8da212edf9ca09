"""Which verification candidates get the verifier's zoom-in search (the costly part)."""

from __future__ import annotations

from splitaudit.indexer.match.geometric_tier import shortlist, zoom_in_mask
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS as TH


def test_small_pairs_and_pairs_without_cosine_get_the_zoom_in_search() -> None:
    cosines = [0.9, 0.9, None, 0.6, float("nan")]
    sides = [32, 500, 500, None, 300]
    assert zoom_in_mask(cosines, sides, TH) == [True, False, True, False, True]


def test_large_pairs_left_without_zoom_in_are_geometric_candidates() -> None:
    cosines = [0.85, 0.6, 0.55]
    sides = [400, 300, 128]
    zoom = zoom_in_mask(cosines, sides, TH)
    assert zoom == [False, False, False]
    assert shortlist(cosines, [False] * 3, sides, TH) == [0, 1, 2]


def test_the_small_side_threshold_decides() -> None:
    at = TH.small_side
    assert zoom_in_mask([0.9, 0.9], [at - 1, at], TH) == [True, False]
