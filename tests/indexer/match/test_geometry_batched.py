"""The batched geometric match gives exactly the matches of OpenCV's brute-force matcher, pair by pair."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageOps

from splitaudit.indexer.demo import CORPUS_PHOTOS, sample_photo
from splitaudit.indexer.match import geometry
from splitaudit.indexer.match.geometry import GeometricMatch, Keypoints, keypoints, match_many


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    return [sample_photo(name) for name in sorted(CORPUS_PHOTOS.values())]


def _opencv_match(query: Keypoints, reference: Keypoints) -> GeometricMatch:
    """``match_keypoints`` with every ratio test through ``cv2.BFMatcher`` (the reference path)."""

    def fit(side: Keypoints, mirrored: bool) -> GeometricMatch:
        if len(side) < 2 or len(reference) < 2:
            q = r = np.zeros((0, 2), np.float32)
        else:
            q, r = geometry._ratio_matches_opencv(side, reference)
        return geometry._fit_matches(q, r, side, reference, mirrored)

    best = fit(query, False)
    if query.mirrored is not None and not best.is_copy():
        flipped = fit(query.mirrored, True)
        if flipped.inliers > best.inliers:
            best = flipped
    return best


def _queries(photos: list[Image.Image]) -> list[Image.Image]:
    first, second = photos[0], photos[1]
    w, h = first.size
    return [
        first.crop((w // 8, h // 8, w * 3 // 4, h * 3 // 4)).rotate(8),  # a copy
        ImageOps.mirror(second),  # a mirrored copy
        first.crop((0, 0, w // 3, h // 3)),  # a small region
        photos[-1],  # an unrelated photo (for the others)
    ]


def test_batched_matches_equal_opencv_brute_force(photos: list[Image.Image]) -> None:
    references = [keypoints(p) for p in photos]
    copies = 0
    for image in _queries(photos):
        query = keypoints(image, with_mirror=True)
        batched = match_many(query, references)
        assert batched == [_opencv_match(query, ref) for ref in references]
        copies += sum(m.is_copy() for m in batched)
    assert copies >= 3  # the comparison covered copies, not only non-matches


def test_ratio_matches_equal_opencv_brute_force(photos: list[Image.Image]) -> None:
    a, b = keypoints(photos[0]), keypoints(photos[0].rotate(5))
    numpy_q, numpy_r = geometry._ratio_matches(a, b)
    cv_q, cv_r = geometry._ratio_matches_opencv(a, b)
    assert len(numpy_q) > 20
    np.testing.assert_array_equal(numpy_q, cv_q)
    np.testing.assert_array_equal(numpy_r, cv_r)


def test_descriptors_that_are_not_small_integers_fall_back_to_opencv(
    photos: list[Image.Image],
) -> None:
    a, b = keypoints(photos[0]), keypoints(photos[0].rotate(5))
    scaled = Keypoints(a.points, a.descriptors * np.float32(0.37), a.width, a.height)
    assert geometry._exact_integers(scaled.descriptors) is None
    q, r = geometry._ratio_matches(scaled, b)
    cv_q, cv_r = geometry._ratio_matches_opencv(scaled, b)
    np.testing.assert_array_equal(q, cv_q)
    np.testing.assert_array_equal(r, cv_r)
    assert match_many(scaled, [b]) == [geometry.match_keypoints(scaled, b)]


def _synthetic(descriptors: np.ndarray, seed: int) -> Keypoints:
    points = np.random.default_rng(seed).uniform(0, 300, (len(descriptors), 2)).astype(np.float32)
    return Keypoints(points, descriptors.astype(np.float32), 320, 240)


def test_ratio_test_on_tied_distances_equals_opencv() -> None:
    # Few distinct descriptor values: many equal distances, so the nearest and second nearest
    # tie often; the choice (lower index) and the ratio test must still be OpenCV's.
    rng = np.random.default_rng(7)
    values = np.array([0, 1, 2, 40, 41], np.float32)
    query = _synthetic(values[rng.integers(0, 5, (300, 128))], 1)
    reference = _synthetic(values[rng.integers(0, 5, (280, 128))], 2)
    reference.descriptors[:40] = query.descriptors[:40]  # exact copies: distance 0, ratio passes
    reference.descriptors[40:60] = query.descriptors[:20]  # and their twins: a tie at 0
    q, r = geometry._ratio_matches(query, reference)
    cv_q, cv_r = geometry._ratio_matches_opencv(query, reference)
    assert len(cv_q) >= 20
    np.testing.assert_array_equal(q, cv_q)
    np.testing.assert_array_equal(r, cv_r)


def test_descriptors_with_large_norms_fall_back_to_opencv() -> None:
    # Integer descriptors whose squared distances reach 2**22, where float32 square roots of
    # distinct integers can be equal: the squared-distance shortcut is not taken.
    rng = np.random.default_rng(3)
    big = _synthetic(rng.integers(150, 256, (120, 128)), 4)
    other = _synthetic(rng.integers(0, 256, (100, 128)), 5)
    assert geometry._exact_integers(big.descriptors) is None
    q, r = geometry._ratio_matches(big, other)
    cv_q, cv_r = geometry._ratio_matches_opencv(big, other)
    np.testing.assert_array_equal(q, cv_q)
    np.testing.assert_array_equal(r, cv_r)


def test_match_many_of_nothing_and_of_featureless_references(photos: list[Image.Image]) -> None:
    query = keypoints(photos[0], with_mirror=True)
    flat = keypoints(Image.new("RGB", (200, 150), (90, 90, 90)))
    assert match_many(query, []) == []
    assert match_many(query, [flat]) == [geometry.match_keypoints(query, flat)]
    assert not match_many(query, [flat])[0].is_copy()


def test_threaded_detection_gives_the_same_matches(photos: list[Image.Image]) -> None:
    from splitaudit.indexer.match.geometric_tier import GeometricTier

    corpus = dict(enumerate(photos))
    query = photos[0].crop((40, 40, 400, 400)).rotate(6)
    ids = [3, 0, 1, 0, 2]  # a repeated id is matched twice, detected once
    one, two = GeometricTier(threads=1), GeometricTier(threads=2)
    try:
        sequential = one.match(query, ids, corpus.get)
        threaded = two.match(query, ids, corpus.get)
        assert threaded == sequential
        assert threaded[1].is_copy() and threaded[3].is_copy()
        assert two.match(query, [4, 1], corpus.get) == one.match(query, [4, 1], corpus.get)
    finally:
        two.close()
        one.close()
    two.close()  # closing twice is harmless


@pytest.mark.parametrize("threads", [1, 2])
def test_a_corpus_item_asked_as_test_image_and_as_candidate_is_detected_once(
    photos: list[Image.Image], threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dedup asks each pair from both sides: item 0 against 1 and 2, then 1 against 0 and 2.
    Passed as ``query_item``, the test image's keypoints are the corpus cache's entry for it:
    three detections (one per image), not five, and the same matches as detecting the test
    image on its own."""
    from splitaudit.indexer.match.geometric_tier import GeometricTier

    a = photos[0]
    b = a.crop((24, 24, a.width - 24, a.height - 24)).rotate(5)  # a copy of a
    corpus = {0: a, 1: b, 2: photos[-1]}
    plain = GeometricTier(threads=threads)
    try:
        expected = [plain.match(a, [1, 2], corpus.get), plain.match(b, [0, 2], corpus.get)]
    finally:
        plain.close()
    assert expected[0][0].is_copy() and expected[1][0].is_copy()
    assert not expected[0][1].is_copy()

    detected = []
    real_detect = geometry._detect

    def counted(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        detected.append(pixels.shape)
        return real_detect(pixels)

    monkeypatch.setattr(geometry, "_detect", counted)
    tier = GeometricTier(threads=threads)
    try:
        first = tier.submit(a, [1, 2], corpus.get, query_item=0)()
        second = tier.submit(b, [0, 2], corpus.get, query_item=1)()
    finally:
        tier.close()
    assert [first, second] == expected
    assert len(detected) == 3  # items 0, 1 and 2, once each

    detected.clear()
    tier = GeometricTier(threads=threads)  # without query_item: the test images detected again
    try:
        assert tier.submit(a, [1, 2], corpus.get)() == expected[0]
        assert tier.submit(b, [0, 2], corpus.get)() == expected[1]
    finally:
        tier.close()
    assert len(detected) == 5


def test_with_mirror_equals_the_test_images_own_detection(photos: list[Image.Image]) -> None:
    """A corpus image's cached keypoints (with or without the content check's pixels, as the
    verification store may give them back) serve as its keypoints as a test image."""
    from dataclasses import replace

    image = photos[1]
    own = keypoints(image, with_mirror=True)
    for cached in (keypoints(image), replace(keypoints(image), pixels=None)):
        made = geometry.as_test_image(cached, image)
        assert made.mirrored is not None and own.mirrored is not None
        for got, want in ((made, own), (made.mirrored, own.mirrored)):
            np.testing.assert_array_equal(got.points, want.points)
            np.testing.assert_array_equal(got.descriptors, want.descriptors)
            np.testing.assert_array_equal(got.pixels, want.pixels)
            assert (got.width, got.height) == (want.width, want.height)
