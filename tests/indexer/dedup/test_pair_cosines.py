"""Cosines of chosen pairs from one pass over streamed vector chunks."""

from __future__ import annotations

import numpy as np

from splitaudit.indexer.dedup.pair_cosines import pair_cosines


def test_pairs_are_scored_in_order_across_chunks_and_missing_vectors_are_flagged() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((6, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = np.array([10, 11, 12, 13, 14, 15], np.int64)
    passes: list[int] = []

    def chunks():  # type: ignore[no-untyped-def]
        passes.append(1)
        yield ids[:4][::-1], vecs[:4][::-1]  # any order within and across chunks
        yield ids[4:], vecs[4:]

    a = np.array([15, 10, 12, 99], np.int64)
    b = np.array([11, 14, 12, 10], np.int64)
    have, cos = pair_cosines(a, b, chunks)
    assert have.tolist() == [True, True, True, False]  # 99 has no vector
    want = [vecs[5] @ vecs[1], vecs[0] @ vecs[4], 1.0]
    assert np.allclose(cos, want, atol=1e-6) and len(passes) == 1
    none, empty = pair_cosines(a, b, lambda: iter([]))
    assert not none.any() and len(empty) == 0
