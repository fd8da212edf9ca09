"""Region candidates for insets (issue 23): which test images get regions, and how region hits
become (row, corpus item) candidates."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.match.inset_candidates import (
    INSET_MIN_SIDE,
    REGION_TOP_K,
    RegionVectors,
    region_candidates,
    region_crops,
)


def test_only_large_files_get_regions_cut_from_their_reduced_decode() -> None:
    small, large = Image.new("RGB", (300, 200)), Image.new("RGB", (256, 160))
    crops, rows = region_crops(
        [small, large], first_row=7, sizes=[(300, 200), (1280, INSET_MIN_SIDE + 400)]
    )
    assert rows.tolist() == [8] * 9  # the small file gets none; the reduced decode of a large one 9
    assert {c.size for c in crops} <= {(115, 72), (116, 72)}  # 45% of the 256 x 160 decode


Search = Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
]


def _search_returning(scores: list[list[float]], ids: list[list[int]]) -> Search:
    """A vector search double: the given (regions x k) scores and ids, whatever the vectors."""

    def search(
        vectors: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        assert len(vectors) == len(scores)
        return np.asarray(scores, np.float32)[:, :k], np.asarray(ids, np.int64)[:, :k]

    return search


def test_each_rows_best_region_hits_above_the_floor_become_candidates() -> None:
    regions = RegionVectors(np.asarray([0, 0, 3]), np.zeros((3, 4), np.float32))
    search = _search_returning(
        [[0.9, 0.7, 0.4], [0.8, 0.75, 0.6], [0.45, 0.3, 0.2]],
        [[11, 12, 13], [12, 14, 15], [11, -1, 12]],
    )
    found = region_candidates(search, regions, floor=0.5)
    # row 0: item 12 is seen by two regions (best 0.8 kept); top 3 by cosine: 11, 12, 14
    assert set(found) == {(0, 11), (0, 12), (0, 14)}
    assert np.allclose([found[(0, 11)], found[(0, 12)], found[(0, 14)]], [0.9, 0.8, 0.75])
    assert len(found) <= REGION_TOP_K * 2
    assert region_candidates(search, RegionVectors.concat([], 4), floor=0.5) == {}
