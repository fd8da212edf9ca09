"""Voronoi join cells: cut cells regrouped by each item's nearest centroid (``voronoi_cells``)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from splitaudit.indexer.store import vector_join
from splitaudit.indexer.store.float_build import new_ivf, spherical_kmeans
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.join_calibrate import (
    as_voronoi,
    calibrate_gap,
    pair_scores,
    probes_per_item,
)
from splitaudit.indexer.store.join_cells import cell_lookup, ivf_cells, split_cells, voronoi_cells
from splitaudit.indexer.store.vector_join import ivf_join, self_join, voronoi_probes


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _vectors(n: int, dim: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Uniform unit vectors, one in ten followed by a near copy (cosine ~0.95); ids 3i+5."""
    rng = np.random.default_rng(seed)
    x = _unit(rng.standard_normal((n, dim)))
    x[1::10] = _unit(
        x[0::10][: len(x[1::10])] + 0.3 * rng.standard_normal((len(x[1::10]), dim)) / np.sqrt(dim)
    )
    return np.arange(n, dtype=np.int64) * 3 + 5, x


def _split(ids: np.ndarray, x: np.ndarray, nlist: int = 8, target: int = 60):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    store = FloatStore(
        new_ivf(x.shape[1], spherical_kmeans(x, nlist, iters=8, rng=rng), "fp32", x),
        model_id="m",
        dim=x.shape[1],
        index_type=f"IVF{nlist}",
        params={"storage": "fp32"},
    )
    store.add(ids, x)
    return store, split_cells(ivf_cells(store), target)


def _chunks(ids: np.ndarray, x: np.ndarray, rows: int = 700):  # type: ignore[no-untyped-def]
    return ((ids[s : s + rows], x[s : s + rows]) for s in range(0, len(ids), rows))


def _pairs(table) -> set[tuple[int, int]]:  # type: ignore[no-untyped-def]
    query = np.repeat(table.keys, np.diff(table.offsets))
    return set(zip(query.tolist(), table.ids.tolist(), strict=True))


def test_voronoi_cells_put_every_item_in_its_nearest_centroids_cell() -> None:
    ids, x = _vectors(4000)
    _store, cells = _split(ids, x)
    assert cells.nlist > 40  # 8 lists of ~500 cut into ~8 sub-cells each
    by_id = dict(zip(ids.tolist(), x, strict=True))
    nearest = np.argmax(x @ cells.centroids.T, axis=1)
    # in the cut cells many items sit in a sub-cell whose centroid is not their nearest
    own = cell_lookup(cells)(ids)
    assert (own != nearest).mean() > 0.05
    regrouped = voronoi_cells(cells, ids[::-1].copy(), nearest[::-1].copy())
    assert regrouped.nlist == cells.nlist and regrouped.sizes.sum() == len(ids)
    seen: list[int] = []
    for c in range(regrouped.nlist):
        cell_ids, vecs = regrouped.get(c)
        assert len(cell_ids) == regrouped.sizes[c]
        assert all(
            np.array_equal(by_id[i], v) for i, v in zip(cell_ids.tolist(), vecs, strict=True)
        )
        assert (nearest[(cell_ids - 5) // 3] == c).all()
        seen += cell_ids.tolist()
    assert sorted(seen) == sorted(ids.tolist())  # every item exactly once
    # an item the coarse pass did not see stays in its cell
    partial = voronoi_cells(_split(ids, x)[1], ids[:100], nearest[:100])
    rest = cell_lookup(partial)(ids[100:])
    assert np.array_equal(rest, own[100:])


def test_voronoi_join_finds_every_planted_pair_probing_fewer_cells() -> None:
    ids, x = _vectors(6000)
    truth_scores = x @ x.T
    planted = {
        (int(ids[a]), int(ids[b])) for a, b in zip(*np.nonzero(truth_scores >= 0.9), strict=True)
    }
    cosine, floor = 0.9, 0.8
    runs = {}
    for voronoi in (False, True):
        _store, cells = _split(ids, x)
        scores = pair_scores(cells, cosine)
        gap, cap, recall = calibrate_gap(
            cells, cosine, scores=as_voronoi(scores) if voronoi else scores
        )
        assert recall >= 0.999
        stats: dict[str, int] = {}
        if voronoi:
            cells, probes = voronoi_probes(cells, _chunks(ids, x), gap, cap)
            table = ivf_join(
                cells, _chunks(ids, x), k=10, floor=floor, nprobe=cap, stats=stats, probes=probes
            )
        else:
            table = ivf_join(
                cells,
                _chunks(ids, x),
                k=10,
                floor=floor,
                nprobe=cap,
                gap=gap,
                stats=stats,
                own=cell_lookup(cells),
            )
        found = _pairs(table)
        assert planted <= found  # every pair at the calibration cosine, both ways
        by_pos = {int(i): n for n, i in enumerate(ids)}
        assert all(truth_scores[by_pos[a], by_pos[b]] >= floor - 1e-5 for a, b in found)
        runs[voronoi] = stats["probes"] / len(ids)
    # the regrouped cells' pairs lie in fewer of the cells around each item
    assert runs[True] < 0.9 * runs[False]


@pytest.mark.parametrize("voronoi", [True, False])
def test_self_join_regroups_cut_cells_only_where_allowed(
    voronoi: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_join, "VORONOI", voronoi)
    ids, x = _vectors(6000)
    store, _cells = _split(ids, x)
    monkeypatch.setattr(vector_join, "split_cells", lambda cells: split_cells(cells, 60))
    table, report = self_join(store, lambda: _chunks(ids, x), k=10, floor=0.8, cosine=0.9)
    assert report.method == "ivf" and report.nlist > 40
    assert report.voronoi is voronoi and report.recall is not None and report.recall >= 0.999
    scores = x @ x.T
    planted = {(int(ids[a]), int(ids[b])) for a, b in zip(*np.nonzero(scores >= 0.9), strict=True)}
    assert planted <= _pairs(table)
    # where the calibration sample says the regrouped cells need no fewer probes: as they are
    monkeypatch.setattr(vector_join, "VORONOI_GAIN", 0.1)
    _table, report = self_join(store, lambda: _chunks(ids, x), k=10, floor=0.8, cosine=0.9)
    assert report.voronoi is False
    # cells too large to hold regrouped: the cut cells as they are
    monkeypatch.setattr(vector_join, "VORONOI_GAIN", 100.0)
    monkeypatch.setattr(vector_join, "DECODE_CACHE_BYTES", 1000)
    _table, report = self_join(store, lambda: _chunks(ids, x), k=10, floor=0.8, cosine=0.9)
    assert report.voronoi is False


def test_probes_per_item_is_what_the_coarse_step_chooses() -> None:
    ids, x = _vectors(4000)
    _store, cells = _split(ids, x)
    scores = pair_scores(cells, 0.9)
    gap, _cap, _recall = calibrate_gap(cells, 0.9, scores=scores)
    stats: dict[str, int] = {}
    ivf_join(
        cells,
        _chunks(ids, x),
        k=10,
        floor=0.8,
        nprobe=cells.nlist,
        gap=gap,
        stats=stats,
        own=cell_lookup(cells),
    )
    estimate = probes_per_item(scores, gap)
    assert abs(estimate - stats["probes"] / len(ids)) < 0.1 * estimate


@pytest.mark.parametrize("voronoi", [True, False])
def test_join_threads_give_the_same_table_bit_for_bit(
    voronoi: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Query batches scored on several threads: the same pairs and the same score bits as on
    one, with the cut cells read from their parent lists (no copies kept: the threads share
    the holder of the parent decoded last)."""
    monkeypatch.setattr(vector_join, "VORONOI", voronoi)
    monkeypatch.setattr(vector_join, "VORONOI_GAIN", 100.0)
    monkeypatch.setattr(vector_join, "QUERY_BATCH", 500)  # 12 batches
    monkeypatch.setattr(
        vector_join, "split_cells", lambda cells: split_cells(replace(cells, cache_limit=0), 60)
    )
    ids, x = _vectors(6000)
    store, _cells = _split(ids, x)
    threads: set[int] = set()
    score = vector_join.score_cells

    def scored_on(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.get_ident())
        time.sleep(0.01)  # batches overlap
        return score(*args, **kwargs)

    monkeypatch.setattr(vector_join, "score_cells", scored_on)
    tables = {}
    for n in (1, 4):
        monkeypatch.setattr(vector_join, "JOIN_THREADS", n)
        threads.clear()
        table, report = self_join(store, lambda: _chunks(ids, x), k=10, floor=0.8, cosine=0.9)
        assert report.voronoi is voronoi
        tables[n] = (table, len(threads))
    assert tables[1][1] == 1 and tables[4][1] > 1  # the batches did run on several threads
    one, four = tables[1][0], tables[4][0]
    for field in ("keys", "offsets", "ids", "scores"):
        assert np.array_equal(getattr(one, field), getattr(four, field)), field
    assert len(one.ids) > len(ids)  # each item itself, and its planted copies
