"""Shape descriptors of thumbnails (``features.shape``): what they keep and what they ignore."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.thumb_edits import rescraped, square_cut
from PIL import Image

from splitaudit.indexer.db.shape_blob import SHAPE_DIM, from_bytes, to_bytes
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.shape import MAX_SIDE, keeps_shape, shape_descriptors
from splitaudit.indexer.match.pair_search import SHAPE_TOP_K
from splitaudit.indexer.match.verify import verify_thumbnail


def _thumb(image: Image.Image) -> np.ndarray:
    return verify_thumbnail(image)


def test_rows_are_unit_vectors_and_a_flat_thumbnail_has_none() -> None:
    rng = np.random.default_rng(0)
    thumbs = rng.integers(0, 256, (3, 32, 32)).astype(np.uint8)
    thumbs[2] = 117  # flat: no gradient anywhere
    d = shape_descriptors(thumbs)
    assert d.shape == (3, SHAPE_DIM) and d.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(d[:2], axis=1), 1.0, atol=1e-5)
    assert not d[2].any()
    faint = np.full((1, 32, 32), 100.0)
    faint[0, :, 16:] = 100.5  # a step of half a grey level: as good as flat
    assert not shape_descriptors(faint).any()
    assert (d >= 0).all()


def test_brightness_and_contrast_do_not_move_the_descriptor() -> None:
    photo = np.asarray(square_cut(sample_photo("astronaut"), 250, 200, 160).convert("L"), float)
    darker = 0.6 * photo + 30  # inside 0..255: no clipping
    d = shape_descriptors(np.stack([photo, darker]))
    np.testing.assert_allclose(d[0], d[1], atol=1e-5)


def test_a_shifted_zoomed_recoloured_copy_finds_its_source_among_look_alikes() -> None:
    """120 crops of the same photos at random places and sizes: the copy's pHash is too far
    for the hash candidates (asserted), its source is among its nearest by shape descriptor
    (the audit's shape candidates)."""
    from splitaudit.indexer.features.perceptual import perceptual_hashes

    photos = [sample_photo(n) for n in ("astronaut", "coffee", "rocket")]
    rng = np.random.default_rng(0)
    crops = []
    for i in range(120):
        p = photos[i % 3]
        side = float(rng.uniform(60, 140))
        cx = float(rng.uniform(side / 2, p.width - side / 2))
        cy = float(rng.uniform(side / 2, p.height - side / 2))
        crops.append(square_cut(p, cx, cy, side))
    source = square_cut(photos[0], 240, 380, 120)
    copy = rescraped(square_cut(photos[0], 252, 372.8, 100))  # moved 10% / 6%, zoomed 1.2
    corpus = [source, *crops]
    distance = bin(perceptual_hashes(copy).phash ^ perceptual_hashes(source).phash).count("1")
    assert distance > 20  # beyond candidate_hamming: no hash search makes it a candidate
    base = shape_descriptors(np.stack([_thumb(c) for c in corpus]))
    scores = base @ shape_descriptors(_thumb(copy)[None])[0]
    assert int((scores > scores[0]).sum()) < SHAPE_TOP_K


def test_stored_bytes_round_trip_and_bad_input_is_refused() -> None:
    d = shape_descriptors(np.random.default_rng(1).integers(0, 256, (2, 32, 32)))
    back = from_bytes([to_bytes(d[0]), to_bytes(d[1])])
    np.testing.assert_allclose(back, d, atol=1e-3)  # float16
    assert from_bytes([]).shape == (0, SHAPE_DIM)
    with pytest.raises(ValueError, match="bytes, expected 256"):
        from_bytes([b"\x00" * 10])
    with pytest.raises(ValueError, match="descriptor"):
        to_bytes(np.zeros(7))
    with pytest.raises(ValueError, match="thumbnails"):
        shape_descriptors(np.zeros((2, 16, 16)))
    assert shape_descriptors(np.zeros((0, 32, 32))).shape == (0, SHAPE_DIM)


def test_only_thumbnails_keep_one_when_features_are_extracted() -> None:
    import io

    def png(image: Image.Image) -> bytes:
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()

    photo = sample_photo("coffee")
    small = photo.resize((MAX_SIDE - 1, 90))
    large = photo.resize((MAX_SIDE + 40, MAX_SIDE))
    assert keeps_shape(MAX_SIDE - 1, 500) and not keeps_shape(MAX_SIDE, 500)
    f_small, _ = extract_features(png(small), hashes_only=True, thumbnail=verify_thumbnail)
    f_large, _ = extract_features(png(large), hashes_only=True, thumbnail=verify_thumbnail)
    f_none, _ = extract_features(png(small), hashes_only=True)
    assert f_small.shape is not None and f_large.shape is None and f_none.shape is None
    expected = shape_descriptors(verify_thumbnail(small)[None])[0]
    np.testing.assert_allclose(from_bytes([f_small.shape])[0], expected, atol=1e-3)
