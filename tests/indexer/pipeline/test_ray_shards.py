"""A float index cut into shards (each mapping only its own bytes) and searched piece by piece
answers exactly what the whole index answers: scores to the bit, ids tie for tie."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.pipeline.ray_match import IndexLayout, ShardedFloats
from splitaudit.indexer.pipeline.ray_shard_search import ShardedSearch
from splitaudit.indexer.pipeline.ray_shards import FloatShard, ShardSpec, plan_shards
from splitaudit.indexer.store.exact import DB_BLOCK
from splitaudit.indexer.store.float_build import build_flat, build_ivf
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.policy import IndexPolicy
from splitaudit.indexer.store.vectors import batch_path, write_batch


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _corpus(folder: Path, n: int, dim: int, seed: int = 0) -> tuple[list[tuple[str, int]], Any]:
    """``n`` unit vectors in batch files, one in twenty repeated three times (tied scores)."""
    rng = np.random.default_rng(seed)
    vecs = _unit(rng.standard_normal((n, dim)))
    for r in range(0, n - 3, 20):
        vecs[r + 1] = vecs[r + 2] = vecs[r]
    ids = np.arange(1, n + 1, dtype=np.int64) * 3
    refs = []
    for b, s in enumerate(range(0, n, 2500)):
        name = f"b{b}"
        write_batch(batch_path(folder, name), ids[s : s + 2500], vecs[s : s + 2500])
        refs.append((name, len(ids[s : s + 2500])))
    return refs, vecs


def _saved(folder: Path, store: FloatStore) -> FloatStore:
    store.save(folder, generation=1, last_batch_id=1)
    return FloatStore.load(folder, model_id=store.model_id, dim=store.dim, mmap=True)


def _sharded(store: FloatStore, specs: list[ShardSpec]) -> tuple[ShardedSearch, list[FloatShard]]:
    shards = [FloatShard(s) for s in specs]
    search = ShardedSearch(
        store,
        specs,
        submit=lambda n, method, *args: getattr(shards[n], method)(*args),
        gather=lambda handles: handles,
    )
    return search, shards


def _queries(vecs: np.ndarray, n: int, seed: int = 1) -> np.ndarray:
    """Half corpus vectors themselves (their tied copies), half noisy copies."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(vecs), n, replace=False)
    q = vecs[picks].copy()
    q[n // 2 :] = _unit(q[n // 2 :] + 0.2 * rng.standard_normal(q[n // 2 :].shape))
    return q


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    assert a[0].dtype == b[0].dtype == np.float32
    assert np.array_equal(a[1], b[1])  # ids, slot by slot (ties in the same order)
    assert a[0].tobytes() == b[0].tobytes()  # scores to the bit


def test_flat_shards_cut_whole_blocks_and_merge_bit_identically(tmp_path: Path) -> None:
    n, dim = 2 * DB_BLOCK + 3000, 8
    refs, vecs = _corpus(tmp_path, n, dim)
    store = _saved(tmp_path, build_flat(tmp_path, refs, model_id="m", dim=dim))
    specs = plan_shards(store, tmp_path, 2)
    assert [(s.start, s.stop) for s in specs] == [(0, 2 * DB_BLOCK), (2 * DB_BLOCK, n)]
    search, shards = _sharded(store, specs)
    assert [s.mapped_bytes() for s in shards] == [s.items * (4 * dim + 8) for s in specs]
    q = _queries(vecs, 2500)
    _same(search.search(q, 10), store.search(q, 10))
    _same(search.search(q[:3], 10), store.search(q[:3], 10))
    item = int(store.vectors_view()[1][-5])
    assert np.array_equal(
        shards[1].reconstruct(np.array([item]))[item], store.index.reconstruct(item)
    )
    assert shards[0].reconstruct(np.array([item])) == {}
    # a small corpus (one block) is one shard, whatever was asked
    assert len(plan_shards(store, tmp_path, 5)) == 3


def test_flat_plan_refuses_a_file_of_another_layout(tmp_path: Path) -> None:
    refs, _vecs = _corpus(tmp_path, 500, 4)
    store = _saved(tmp_path, build_flat(tmp_path, refs, model_id="m", dim=4))
    with open(tmp_path / "embeddings.faiss", "ab") as fh:
        fh.write(b"\0" * 16)
    with pytest.raises(IndexMismatchError, match="layout"):
        plan_shards(store, tmp_path, 2)


@pytest.mark.parametrize(
    "storage,ondisk", [("fp16", False), ("fp32", False), ("sq8", False), ("fp16", True)]
)
def test_ivf_shards_by_list_merge_bit_identically(
    tmp_path: Path, storage: str, ondisk: bool
) -> None:
    n, dim = 6000, 16
    refs, vecs = _corpus(tmp_path, n, dim)
    policy = IndexPolicy(
        flat_max=1000,
        calibration_queries=200,
        storage=storage,  # type: ignore[arg-type]
        ondisk_min=1000 if ondisk else 2_000_000,
        ondisk_shard_rows=2000,
    )
    built = build_ivf(tmp_path, refs, model_id="m", dim=dim, storage=storage, policy=policy)
    store = _saved(tmp_path, built)
    assert store.is_ondisk == ondisk and not store.is_exact
    specs = plan_shards(store, tmp_path, 3)
    assert len(specs) == 3 and specs[0].start == 0 and specs[-1].stop == int(store.index.nlist)
    assert sum(s.items for s in specs) == n
    search, shards = _sharded(store, specs)
    whole = sum(s.mapped_bytes() for s in shards)
    assert all(s.mapped_bytes() < 0.6 * whole for s in shards)  # each maps its own lists
    nlist = int(store.index.nlist)
    for nprobe in (nlist, nlist // 8):  # every list (calibration may ask it), or a few
        store.index.nprobe = nprobe
        search, shards = _sharded(store, plan_shards(store, tmp_path, 3))
        by_list = -(-64 * nlist // nprobe)  # the smallest batch searched list by list
        for rows in (7, by_list - 1, by_list, 2 * by_list + 300):
            q = _queries(vecs, min(rows, n), seed=rows)
            _same(search.search(q, 10), store.search(q, 10))
        assert search.researched > 0  # tied rows on FAISS's path were searched again
    item = 3 * 4000
    got = {}
    for shard in shards:
        got.update(shard.reconstruct(np.array([item])))
    assert np.array_equal(got[item], store.index.reconstruct(item))


def test_actor_vector_store_reads_vectors_from_shards_and_refuses_unanswered_searches(
    tmp_path: Path,
) -> None:
    layout = IndexLayout("c", 1, 1, tmp_path, True, "m", 4, 3, "Flat", {})
    vectors = {7: np.array([1, 0, 0, 0], np.float32)}

    def vector(item: int) -> np.ndarray:
        if item not in vectors:
            raise RuntimeError("in no shard")
        return vectors[item]

    floats = ShardedFloats(layout, vector)
    assert floats.count == 3 and floats.index.reconstruct(7)[0] == 1.0
    with pytest.raises(RuntimeError):
        floats.index.reconstruct(8)  # the engine then leaves that pair without a cosine
    with pytest.raises(RuntimeError, match="round 1 did not answer"):
        floats.search(np.ones((2, 4), np.float32), 10)
    empty = ShardedFloats(IndexLayout("c", 1, 1, tmp_path, True, "m", 4, 0, "Flat", {}), vector)
    scores, ids = empty.search(np.ones((2, 4), np.float32), 10)
    assert ids.shape == (2, 10) and (ids == -1).all() and not scores.any()
