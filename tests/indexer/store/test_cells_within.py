"""``cells_within``: the cells a row probes, against a direct computation of the rule."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.store.join_cells import cells_within


def _direct(q, centroids, gap, cap, own):
    """Row by row: cells within ``gap`` of the best, the best ``cap`` of them, plus its own."""
    out = []
    for row, scores in enumerate(q @ centroids.T):
        near = np.flatnonzero(scores >= scores.max() - gap)
        if len(near) > cap:
            near = np.argpartition(-scores, cap - 1)[:cap]
        cells = set(near.tolist())
        if own is not None and own[row] >= 0:
            cells.add(int(own[row]))
        out.extend((row, c) for c in sorted(cells))
    return out


@pytest.mark.parametrize(("gap", "cap"), [(0.05, 50), (0.3, 6), (0.0, 1), (2.0, 3)])
@pytest.mark.parametrize("with_own", [True, False])
def test_cells_within_matches_the_rule(gap: float, cap: int, with_own: bool) -> None:
    rng = np.random.default_rng(11)
    centroids = rng.standard_normal((97, 8)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    q = rng.standard_normal((1_300, 8)).astype(np.float32)  # more than one block of rows
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    own = rng.integers(-1, len(centroids), len(q)) if with_own else None
    rows, cells = cells_within(q, centroids, gap, cap, own)
    got = list(zip(rows.tolist(), cells.tolist(), strict=True))
    want = _direct(q, centroids, gap, cap, own)
    assert got == sorted(got)  # rows ascending, cells ascending within a row
    assert got == want  # random scores: no ties at the cap
    if with_own:
        assert own is not None
        inside = own >= 0
        assert set(zip(np.flatnonzero(inside).tolist(), own[inside].tolist(), strict=True)) <= set(
            got
        )
