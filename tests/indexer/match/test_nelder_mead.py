"""Nelder-Mead for the low-resolution alignment's similarity search: many problems side by side
(``nelder_mead_many``) each end exactly where they end alone (``nelder_mead``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.match.nelder_mead import nelder_mead, nelder_mead_many

STEPS = np.array([0.04, 0.5, 0.5])


def test_many_problems_side_by_side_end_where_each_ends_alone() -> None:
    rng = np.random.default_rng(0)
    n = 24
    targets = np.column_stack(
        [rng.uniform(0.8, 1.2, n), rng.uniform(-3, 3, n), rng.uniform(-3, 3, n)]
    )
    starts = np.column_stack([np.ones(n), rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)])
    scale = np.array([0.04, 0.5, 0.5])

    def cost_of(row: int, p: npt.NDArray[np.float64]) -> float:
        """A bowl with ripples (different problems take different branches: expansions,
        contractions, shrinks), and a refused region (cost 2) for every fifth."""
        d = (p - targets[row]) / scale
        value = float(np.sum(d**2) + 2.0 * np.sin(3.0 * d[1]) ** 2)
        return 2.0 if row % 5 == 0 and p[1] > starts[row][1] + 1.0 else value

    asked: list[int] = []

    def costs(
        points: npt.NDArray[np.float64], rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.float64]:
        asked.append(len(rows))
        return np.array([cost_of(int(r), p) for r, p in zip(rows, points, strict=True)])

    best, best_cost = nelder_mead_many(costs, starts, STEPS, 60)
    for row in range(n):
        alone = nelder_mead(lambda p, row=row: cost_of(row, p), starts[row], STEPS, 60)
        np.testing.assert_array_equal(best[row], alone)
        assert best_cost[row] == cost_of(row, alone)
        assert cost_of(row, alone) < cost_of(row, starts[row])  # it did search
    # one call per step for every problem still searching: ~60 calls, not n * 60
    assert len(asked) <= 70
    assert asked[0] == n


def test_nelder_mead_many_of_nothing() -> None:
    def costs(
        points: npt.NDArray[np.float64], rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.float64]:
        raise AssertionError("no problem, no evaluation")

    best, cost = nelder_mead_many(costs, np.zeros((0, 3)), STEPS, 60)
    assert best.shape == (0, 3) and cost.shape == (0,)
