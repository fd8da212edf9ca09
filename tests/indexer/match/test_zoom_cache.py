"""Each candidate's zoom-in references prepared once per verification pass (``ZoomCache``)."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.match import verify, zoom_cache
from splitaudit.indexer.match.verify import prepare_references, verify_scores
from splitaudit.indexer.match.zoom_cache import ZoomCache


def _thumbs(n: int, seed: int = 0) -> np.ndarray:
    """Smooth random 32-px thumbnails (blurred noise: texture the verifier can score)."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 1, (n, 8, 8))
    big = np.kron(noise, np.ones((4, 4)))
    return np.clip(128 + 40 * big, 0, 255).astype(np.uint8)


def test_cached_references_score_as_freshly_prepared_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thumbs = _thumbs(12)
    query = thumbs[3]
    prepared: list[int] = []
    made = verify.zoomed_references
    monkeypatch.setattr(
        zoom_cache, "zoomed_references", lambda t: prepared.append(len(t)) or made(t)
    )
    cache = ZoomCache()
    zoom = np.arange(12) % 3 != 0  # 8 of the 12 get the zoom-in search
    first = cache.references(list(range(100, 112)), thumbs, zoom)
    assert prepared == [8] and (cache.misses, cache.hits) == (8, 0) and len(cache) == 8
    expected = verify_scores(query, prepare_references(thumbs, zoom), zoom)
    np.testing.assert_array_equal(verify_scores(query, first, zoom), expected)
    # another test image with six of them (four seen, two new) and a key twice: only the
    # two new are prepared, and each score is the one a fresh preparation gives
    keys = [104, 105, 200, 107, 201, 104]
    rows = [4, 5, 0, 7, 1, 4]
    again = cache.references(keys, thumbs[rows], True)
    assert prepared == [8, 2] and cache.hits == 4 and cache.misses == 10
    fresh = verify_scores(thumbs[9], prepare_references(thumbs[rows], True), True)
    np.testing.assert_allclose(verify_scores(thumbs[9], again, True), fresh, atol=1e-5)
    assert cache.nbytes > 0


def test_the_least_recently_used_are_dropped_past_the_byte_budget() -> None:
    thumbs = _thumbs(6, seed=1)
    one = ZoomCache()
    one.references([1], thumbs[:1], True)
    cache = ZoomCache(max_bytes=3 * one.nbytes)
    cache.references([1, 2, 3], thumbs[:3], True)
    cache.references([1], thumbs[:1], True)  # 1 used again: 2 is now the oldest
    cache.references([4], thumbs[3:4], True)
    assert len(cache) == 3 and cache.nbytes <= 3 * one.nbytes
    cache.references([2], thumbs[1:2], True)
    assert cache.misses == 5  # 2 was dropped and prepared again; 1 was kept
    cache.references([3], thumbs[2:3], True)
    assert cache.misses == 6  # 3 was the oldest when 2 came back
    cache.references([4, 2, 3], thumbs[[3, 1, 2]], True)
    assert cache.misses == 6 and cache.hits == 4  # the three held now


def test_no_zoom_in_search_prepares_nothing_and_keys_must_match() -> None:
    thumbs = _thumbs(3, seed=2)
    cache = ZoomCache()
    refs = cache.references([1, 2, 3], thumbs, False)
    assert refs.zoomed is None and len(cache) == 0
    with pytest.raises(ValueError, match="2 keys for 3 thumbnails"):
        cache.references([1, 2], thumbs, True)
