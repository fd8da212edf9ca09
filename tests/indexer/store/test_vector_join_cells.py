"""Join cells: the sub-cells ``split_cells`` keeps as copies are those it would gather lazily."""

from __future__ import annotations

import numpy as np

from splitaudit.indexer.store.join_cells import DECODE_CACHE_BYTES, kmeans_cells, split_cells


def _vectors(n: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return np.arange(n, dtype=np.int64) * 3 + 1, x / np.linalg.norm(x, axis=1, keepdims=True)


def test_kmeans_cells_are_a_partition_of_the_vectors() -> None:
    ids, x = _vectors(3000, 16)
    cells = kmeans_cells(ids, x, 12)
    got_ids = np.concatenate([cells.get(c)[0] for c in range(cells.nlist)])
    got_vecs = np.concatenate([cells.get(c)[1] for c in range(cells.nlist)])
    assert sorted(got_ids.tolist()) == ids.tolist()
    assert np.array_equal(got_vecs, x[(got_ids - 1) // 3])
    assert [len(cells.get(c)[0]) for c in range(cells.nlist)] == cells.sizes.tolist()


def test_split_cells_kept_as_copies_match_the_lazy_ones() -> None:
    ids, x = _vectors(3000, 16)
    lazy = split_cells(kmeans_cells(ids, x, 6), 50)  # kmeans cells: no cache, gathered lazily
    cached = kmeans_cells(ids, x, 6)
    cached.cache_limit = DECODE_CACHE_BYTES  # as an IVF store's decoded lists
    kept = split_cells(cached, 50)
    assert kept.nlist == lazy.nlist > 30
    assert np.array_equal(kept.centroids, lazy.centroids)
    for c in range(kept.nlist):
        (a_ids, a_vecs), (b_ids, b_vecs) = kept.get(c), lazy.get(c)
        assert np.array_equal(a_ids, b_ids) and np.array_equal(a_vecs, b_vecs)
        assert a_vecs.flags.c_contiguous and len(a_ids) == kept.sizes[c]
    assert not cached._cache  # the parents' decoded vectors were handed over, not doubled
