"""Exact top-k search: its products run on one BLAS thread whatever the process holds (their
bits must not depend on who runs them), its query blocks in parallel, its answer the brute
force one."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from splitaudit.indexer.store import exact
from splitaudit.indexer.store.exact import QUERY_BLOCK, TopK, exact_search


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"]


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_products_run_on_one_blas_thread_and_the_setting_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[int]] = []
    update_dot = TopK.update_dot

    def spy(self: TopK, *args: object) -> None:
        seen.append(_blas_threads())
        update_dot(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(TopK, "update_dot", spy)
    rng = np.random.default_rng(0)
    base = _unit(rng.standard_normal((500, 16)))
    ids = np.arange(500, dtype=np.int64)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        exact_search(base[:5], base, ids, 3)
        assert _blas_threads() == before
    assert seen and all(counts and set(counts) == {1} for counts in seen)


def test_query_blocks_in_parallel_answer_as_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exact, "usable_cpus", lambda: 3)
    rng = np.random.default_rng(1)
    base = _unit(rng.standard_normal((3000, 12)))
    base[7] = base[8]  # a tie
    ids = np.arange(3000, dtype=np.int64) * 2
    queries = _unit(rng.standard_normal((2 * QUERY_BLOCK + 37, 12)))
    queries[0] = base[7]
    scores, found = exact_search(queries, base, ids, 5)
    full = queries @ base.T
    want = np.sort(full, axis=1)[:, ::-1][:, :5]
    assert np.allclose(scores, want, atol=1e-6)
    assert set(found[0, :2].tolist()) == {14, 16}
    # each id's score is its true product
    rows = np.arange(len(queries))[:, None]
    assert np.allclose(scores, full[rows, found // 2], atol=1e-6)
    # and the order of the blocks does not depend on the pool: one CPU gives the same bits
    monkeypatch.setattr(exact, "usable_cpus", lambda: 1)
    again = exact_search(queries, base, ids, 5)
    assert again[0].tobytes() == scores.tobytes() and np.array_equal(again[1], found)
