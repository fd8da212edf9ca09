"""FAISS float/binary stores: ids are item ids, saves are atomic, sidecars refuse mismatches."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store.binary_index import BinaryStore, hashes_to_bytes, signed_to_unsigned
from splitaudit.indexer.store.float_index import FloatStore


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_float_store_search_returns_db_ids_and_cosines(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vecs = _unit(rng, 50, 16)
    store = FloatStore.create(model_id="m", dim=16)
    store.add(np.arange(1000, 1050, dtype=np.int64), vecs)
    scores, ids = store.search(vecs[[3, 7]], 2)
    assert ids[:, 0].tolist() == [1003, 1007]
    assert np.allclose(scores[:, 0], 1.0, atol=1e-5)
    store.save(tmp_path, generation=4, last_batch_id=2)
    loaded = FloatStore.load(tmp_path, model_id="m", dim=16)
    assert loaded.count == 50 and loaded.generation == 4 and loaded.last_batch_id == 2
    assert loaded.search(vecs[[3]], 1)[1][0, 0] == 1003


def test_float_store_pads_when_fewer_than_k(tmp_path: Path) -> None:
    store = FloatStore.create(model_id="m", dim=4)
    store.add(np.array([9], np.int64), np.array([[1, 0, 0, 0]], np.float32))
    _scores, ids = store.search(np.array([[1, 0, 0, 0]], np.float32), 3)
    assert ids.tolist() == [[9, -1, -1]]


def test_float_store_refuses_other_model_or_dim(tmp_path: Path) -> None:
    store = FloatStore.create(model_id="model-a", dim=8)
    store.save(tmp_path, generation=1, last_batch_id=0)
    with pytest.raises(IndexMismatchError, match="model"):
        FloatStore.load(tmp_path, model_id="model-b", dim=8)
    with pytest.raises(IndexMismatchError, match="dim"):
        FloatStore.load(tmp_path, model_id="model-a", dim=16)


def test_float_store_refuses_sidecar_count_mismatch(tmp_path: Path) -> None:
    store = FloatStore.create(model_id="m", dim=4)
    store.add(np.array([1], np.int64), np.array([[1, 0, 0, 0]], np.float32))
    store.save(tmp_path, generation=1, last_batch_id=1)
    side = json.loads((tmp_path / "embeddings.json").read_text())
    side["count"] = 5
    (tmp_path / "embeddings.json").write_text(json.dumps(side))
    with pytest.raises(IndexMismatchError, match="sidecar says 5"):
        FloatStore.load(tmp_path, model_id="m", dim=4)


def test_missing_sidecar_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IndexMismatchError, match="missing"):
        FloatStore.load(tmp_path, model_id="m", dim=4)


def test_save_leaves_no_temp_files(tmp_path: Path) -> None:
    store = BinaryStore.create()
    store.add(np.array([1, 2], np.int64), np.array([1, 2**63 + 5], np.uint64))
    store.save(tmp_path, generation=1, max_item_id=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["phash.faiss", "phash.json"]


def test_hash_bytes_are_big_endian() -> None:
    b = hashes_to_bytes(np.array([0x0102030405060708], np.uint64))
    assert b.tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]


def test_signed_round_trip() -> None:
    assert signed_to_unsigned([-1]).tolist() == [2**64 - 1]


def test_binary_radius_search_is_inclusive_and_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    base = rng.integers(0, 2**63, size=200, dtype=np.int64).astype(np.uint64)
    store = BinaryStore.create()
    store.add(np.arange(1, 201, dtype=np.int64), base)
    query = np.array([int(base[10]) ^ 0b1111], np.uint64)  # 4 bits flipped
    ids, dists = store.search_radius(query, 4)[0]
    assert 11 in ids.tolist()
    assert dists[ids.tolist().index(11)] == 4
    assert 11 not in store.search_radius(query, 3)[0][0].tolist()
    # brute force agrees
    brute = [i + 1 for i, h in enumerate(base) if bin(int(h) ^ int(query[0])).count("1") <= 4]
    assert sorted(ids.tolist()) == sorted(brute)
    store.save(tmp_path, generation=2, max_item_id=200)
    loaded = BinaryStore.load(tmp_path)
    assert loaded.count == 200 and loaded.max_item_id == 200
    assert 11 in loaded.search_radius(query, 4)[0][0].tolist()
