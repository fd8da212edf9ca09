"""The two-level coarse step: each item's cells chosen among its own cell's neighbours, used
only where the calibration pairs say it finds what the full step finds."""

from __future__ import annotations

import numpy as np

from splitaudit.indexer.store.join_calibrate import JOIN_RECALL, calibrate_gap, calibrate_width
from splitaudit.indexer.store.join_cells import (
    cell_lookup,
    cells_near_own,
    cells_within,
    centroid_graph,
    kmeans_cells,
    probe_cells,
)
from splitaudit.indexer.store.vector_join import ivf_join


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _clustered(n: int, dim: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Low-dimensional clustered vectors (a centroid's neighbours are its items' neighbours),
    each tenth one with a near copy."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((400, dim)).astype(np.float32)
    x = _unit(centres[rng.integers(0, 400, n)] + 0.25 * rng.standard_normal((n, dim)))
    rows = np.arange(0, n - 1, 10)
    x[rows + 1] = _unit(x[rows] + 0.002 * rng.standard_normal((len(rows), dim)))
    return np.arange(1, n + 1, dtype=np.int64) * 7, x


def _pairs(table) -> set[tuple[int, int]]:
    q = np.repeat(table.keys, np.diff(table.offsets))
    return set(zip(q.tolist(), table.ids.tolist(), strict=True))


def test_centroid_graph_lists_each_cell_then_its_nearest() -> None:
    rng = np.random.default_rng(0)
    c = _unit(rng.standard_normal((50, 5)))
    graph = centroid_graph(c, 7)
    assert graph.shape == (50, 7)
    assert np.array_equal(graph[:, 0], np.arange(50))
    sims = c @ c.T
    np.fill_diagonal(sims, -np.inf)
    want = np.argsort(-sims, axis=1)[:, :6]
    assert np.array_equal(graph[:, 1:], want)
    assert np.array_equal(centroid_graph(c, 80)[:, 0], np.arange(50))  # width capped at nlist


def test_cells_near_own_is_the_gap_rule_among_the_neighbours() -> None:
    rng = np.random.default_rng(1)
    c = _unit(rng.standard_normal((40, 6)))
    q = _unit(rng.standard_normal((900, 6)))
    own = rng.integers(-1, 40, len(q))
    graph = centroid_graph(c, 9)
    rows, cells = cells_near_own(q, c, graph, 0.2, 4, own)
    got = set(zip(rows.tolist(), cells.tolist(), strict=True))
    want: set[tuple[int, int]] = set()
    for r in range(len(q)):
        if own[r] < 0:  # no cell: the full step
            continue
        near = graph[own[r]]
        s = q[r] @ c[near].T
        keep = np.flatnonzero(s >= s.max() - 0.2)
        if len(keep) > 4:
            keep = np.argsort(-s)[:4]
        want |= {(r, int(near[j])) for j in keep} | {(r, int(own[r]))}
    outside = np.flatnonzero(own < 0)
    r_out, c_out = cells_within(q[outside], c, 0.2, 4)
    want |= set(zip(outside[r_out].tolist(), c_out.tolist(), strict=True))
    assert got == want and len(got) == len(rows)  # each (row, cell) once
    # probe_cells: the same cells, by cell, rows ascending within a cell
    rows, cells = probe_cells(q, c, 0.2, 4, own, graph)
    assert set(zip(rows.tolist(), cells.tolist(), strict=True)) == want
    key = cells * len(q) + rows
    assert np.all(np.diff(key) > 0)


def test_two_level_step_on_clustered_vectors_keeps_the_pairs() -> None:
    ids, x = _clustered(20_000, 6)
    cells = kmeans_cells(ids, x, 200)
    gap, cap, _recall = calibrate_gap(cells, 0.9)
    graph, coarse = calibrate_width(cells, 0.9, gap)
    assert graph is not None and coarse.width is not None
    assert coarse.width <= cells.nlist // 2 and graph.shape == (cells.nlist, coarse.width)
    assert coarse.recall >= min(JOIN_RECALL, coarse.full)
    assert coarse.items > 0 and coarse.differ <= coarse.items
    own = cell_lookup(cells)
    full_stats: dict[str, int] = {}
    two_stats: dict[str, int] = {}
    chunks = [(ids[s : s + 5000], x[s : s + 5000]) for s in range(0, len(ids), 5000)]
    full = ivf_join(cells, chunks, k=10, floor=0.8, nprobe=cap, gap=gap, own=own, stats=full_stats)
    two = ivf_join(
        cells, chunks, k=10, floor=0.8, nprobe=cap, gap=gap, own=own, graph=graph, stats=two_stats
    )
    planted = {(int(ids[r]), int(ids[r + 1])) for r in range(0, len(ids) - 1, 10)}
    assert planted <= _pairs(full) and planted <= _pairs(two)  # no planted copy missed
    same = len(_pairs(full) & _pairs(two)) / len(_pairs(full))
    assert same >= JOIN_RECALL
    assert 0 < two_stats["probes"] <= 1.01 * full_stats["probes"]


def test_uniform_vectors_fall_back_to_the_full_step() -> None:
    """Uniform 64-d vectors (the bench's): a cell's nearest centroids are not where its items'
    pairs are, so no width keeps the pairs and the join scores every centroid."""
    rng = np.random.default_rng(2)
    x = _unit(rng.standard_normal((30_000, 64)))
    cells = kmeans_cells(np.arange(len(x), dtype=np.int64), x, 128)
    gap, _cap, _recall = calibrate_gap(cells, 0.94)
    graph, coarse = calibrate_width(cells, 0.94, gap)
    assert graph is None and coarse.width is None
    assert coarse.recall < JOIN_RECALL <= coarse.full
