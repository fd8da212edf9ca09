"""The accuracy bench's model of the engine's candidates: vector and pHash top-k."""

from __future__ import annotations

import numpy as np

from bench.accuracy.scores import nominated_pairs


def test_candidates_are_the_vector_and_the_phash_top_k() -> None:
    cosine = np.array([[0.9, 0.8, 0.7, 0.1, 0.2]], np.float32)
    hamming = np.array([[30, 30, 30, 12, 25]], np.int16)
    # by cosine alone: the two best
    assert nominated_pairs(cosine, k=2).tolist() == [[True, True, False, False, False]]
    # the pHash's two nearest join them, within candidate_hamming only (25 > 20)
    got = nominated_pairs(cosine, hamming, candidate_hamming=20, k=2)
    assert got.tolist() == [[True, True, False, True, False]]
    assert nominated_pairs(cosine, hamming, candidate_hamming=25, k=2)[0, 4]
