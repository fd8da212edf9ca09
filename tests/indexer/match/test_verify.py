"""Behaviour of the shift / scale / colour-tolerant near-duplicate verifier."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.match.verify import (
    THUMB_SIZE,
    prepare_references,
    verify_score,
    verify_scores,
    verify_thumbnail,
)


def natural_photo(seed: int, size: int = 192) -> Image.Image:
    """A colour image with a natural 1/f spectrum: textures at every scale, like a photo."""
    rng = np.random.default_rng(seed)
    freq = np.sqrt(np.fft.fftfreq(size)[:, None] ** 2 + np.fft.fftfreq(size)[None, :] ** 2)
    freq[0, 0] = 1.0
    channels = []
    for _ in range(3):
        spectrum = (rng.normal(size=(size, size)) + 1j * rng.normal(size=(size, size))) / freq**1.1
        field = np.real(np.fft.ifft2(spectrum))
        channels.append((field - field.mean()) / field.std())
    mixed = np.stack(channels, axis=-1) @ rng.uniform(0.3, 1.0, size=(3, 3))
    pixels = 128 + 40 * mixed / mixed.std()
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def lowres(
    photo: Image.Image, size: int, *, dx: float = 0.0, dy: float = 0.0, zoom: float = 1.0
) -> Image.Image:
    """Render the photo's central 100 px square at ``size`` px, moved by (dx, dy) output pixels."""
    centre = photo.width / 2
    half = 50 * zoom
    step = 100 / size
    box = (
        centre - half + dx * step,
        centre - half + dy * step,
        centre + half + dx * step,
        centre + half + dy * step,
    )
    return photo.resize((size, size), Image.Resampling.LANCZOS, box=box)


def jpeg(image: Image.Image, quality: int) -> Image.Image:
    """Round-trip through JPEG at ``quality``."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def recolour(image: Image.Image) -> Image.Image:
    """A white-balance and brightness change."""
    pixels = np.asarray(image, dtype=np.float32) * np.array([1.15, 0.95, 0.85]) + 12
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def test_shifted_zoomed_recoloured_lowres_copy_scores_high() -> None:
    photo = natural_photo(1)
    original = lowres(photo, 32)
    copy = jpeg(recolour(lowres(photo, 32, dx=2, dy=-2, zoom=1.05)), 75)
    assert verify_score(copy, original) > 0.8


def test_copy_at_another_resolution_scores_high() -> None:
    photo = natural_photo(2)
    assert verify_score(lowres(photo, 64, dx=1), lowres(photo, 32)) > 0.8


def test_unrelated_lowres_images_score_low() -> None:
    originals = [lowres(natural_photo(seed), 32) for seed in range(10, 16)]
    query = lowres(natural_photo(3), 32)
    scores = verify_scores(query, originals)
    assert scores.max() < 0.5


def test_edited_copy_beats_every_unrelated_candidate() -> None:
    photo = natural_photo(4)
    candidates = [lowres(natural_photo(seed), 48) for seed in range(20, 26)] + [lowres(photo, 48)]
    scores = verify_scores(jpeg(lowres(photo, 48, dx=-3, dy=1), 75), candidates)
    assert int(np.argmax(scores)) == len(candidates) - 1


def test_mirrored_copy_scores_high_and_is_not_needed_for_the_plain_one() -> None:
    photo = natural_photo(5)
    original = lowres(photo, 32)
    mirrored = lowres(photo, 32, dx=1).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    assert verify_score(mirrored, original) > 0.8
    assert verify_score(original, original) == pytest.approx(1.0, abs=1e-4)


def test_full_size_edit_verifies_against_its_original() -> None:
    photo = natural_photo(6, size=256)
    assert verify_score(jpeg(photo.resize((128, 128)), 30), photo) > 0.9


def test_flat_images_do_not_verify_as_the_same_picture() -> None:
    rng = np.random.default_rng(0)
    flat_a = Image.fromarray((200 + rng.integers(0, 3, size=(32, 32, 3))).astype(np.uint8), "RGB")
    flat_b = Image.fromarray((90 + rng.integers(0, 3, size=(32, 32, 3))).astype(np.uint8), "RGB")
    assert verify_score(flat_a, flat_b) < 0.3


def test_scores_lie_in_the_documented_range() -> None:
    query = lowres(natural_photo(7), 32)
    candidates = [lowres(natural_photo(seed), 32) for seed in range(30, 40)] + [query]
    scores = verify_scores(query, candidates)
    assert scores.dtype == np.float32
    assert np.all(scores >= -1.0) and np.all(scores <= 1.0)


def test_batched_scores_equal_single_pair_scores() -> None:
    query = lowres(natural_photo(8), 40, dx=2)
    candidates = [lowres(natural_photo(seed), 40) for seed in (8, 41, 42, 43)]
    batched = verify_scores(query, candidates)
    single = [verify_score(query, c) for c in candidates]
    np.testing.assert_allclose(batched, single, atol=1e-6)


def test_thumbnails_and_prepared_references_give_the_same_scores_as_images() -> None:
    query = lowres(natural_photo(9), 32, dy=1)
    candidates = [lowres(natural_photo(seed), 64) for seed in (9, 50, 51)]
    thumbs = np.stack([verify_thumbnail(c) for c in candidates])
    from_images = verify_scores(query, candidates)
    np.testing.assert_allclose(verify_scores(query, thumbs), from_images, atol=1e-6)
    np.testing.assert_allclose(verify_scores(query, list(thumbs)), from_images, atol=1e-6)
    np.testing.assert_allclose(
        verify_scores(query, prepare_references(thumbs)), from_images, atol=1e-6
    )


def test_thumbnail_is_32px_grayscale_uint8() -> None:
    thumb = verify_thumbnail(natural_photo(10, size=300))
    assert thumb.shape == (THUMB_SIZE, THUMB_SIZE)
    assert thumb.dtype == np.uint8
    assert verify_thumbnail(thumb) is thumb


def test_no_candidates_gives_an_empty_array() -> None:
    scores = verify_scores(lowres(natural_photo(11), 32), [])
    assert scores.shape == (0,)


@pytest.mark.parametrize("fraction", [0.8, 0.7, 0.6])
def test_lowres_zoom_in_crop_verifies_and_other_tiles_do_not(fraction: float) -> None:
    from splitaudit.indexer.demo import sample_photo

    scene = sample_photo("astronaut")
    tiles = [
        (96.0 + c * 160, 96.0 + r * 160, 256.0 + c * 160, 256.0 + r * 160)
        for r in range(2)
        for c in range(2)
    ]
    references = [scene.resize((32, 32), Image.Resampling.LANCZOS, box=t) for t in tiles]
    x0, y0, x1, _ = tiles[0]
    side = (x1 - x0) * fraction
    dx = (x1 - x0 - side) * 0.7  # off-centre: the crop sits towards one corner
    query = scene.resize(
        (32, 32), Image.Resampling.LANCZOS, box=(x0 + dx, y0, x0 + dx + side, y0 + side)
    )
    scores = verify_scores(query, references)
    assert scores[0] >= 0.7
    assert scores[1:].max() < 0.6


def _astronaut_crop_and_tiles(fraction: float) -> tuple[Image.Image, list[Image.Image]]:
    """A 32 px query showing ``fraction`` of the first of four 32 px tiles of one photo."""
    from splitaudit.indexer.demo import sample_photo

    scene = sample_photo("astronaut")
    tiles = [(96.0 + c * 160, 96.0, 256.0 + c * 160, 256.0) for c in range(2)]
    references = [scene.resize((32, 32), Image.Resampling.LANCZOS, box=t) for t in tiles]
    x0, y0, x1, _ = tiles[0]
    side = (x1 - x0) * fraction
    box = (x0, y0, x0 + side, y0 + side)
    return scene.resize((32, 32), Image.Resampling.LANCZOS, box=box), references


def test_zoom_in_search_runs_only_on_the_candidates_asked_for() -> None:
    query, references = _astronaut_crop_and_tiles(0.6)
    everywhere = verify_scores(query, references)
    only_second = verify_scores(query, references, zoom_in=[False, True])
    assert everywhere[0] >= 0.7
    assert only_second[0] < 0.7  # the 60% crop needs the zoom-in search to verify
    assert only_second[1] == pytest.approx(everywhere[1], abs=1e-6)
    nowhere = verify_scores(query, references, zoom_in=False)
    assert nowhere[0] == pytest.approx(only_second[0], abs=1e-6)


def test_prepared_references_serve_any_subset_of_their_zoom_in_rows() -> None:
    query, references = _astronaut_crop_and_tiles(0.7)
    thumbs = np.stack([verify_thumbnail(r) for r in references])
    direct = verify_scores(query, thumbs, zoom_in=[True, False])
    reused = verify_scores(query, prepare_references(thumbs), zoom_in=[True, False])
    np.testing.assert_allclose(reused, direct, atol=1e-6)


def test_zoom_in_asked_of_references_prepared_without_it_is_refused() -> None:
    query, references = _astronaut_crop_and_tiles(0.7)
    prepared = prepare_references(references, zoom_in=False)
    with pytest.raises(ValueError, match="prepare_references"):
        verify_scores(query, prepared, zoom_in=True)


def test_references_take_scores_like_a_fresh_preparation() -> None:
    from splitaudit.indexer.match.verify import prepare_references

    rng = np.random.default_rng(3)
    thumbs = rng.integers(0, 256, (6, 32, 32), dtype=np.uint8)
    thumbs[4] = np.roll(thumbs[1], 1, axis=1)  # a shifted copy of row 1
    query = thumbs[1]
    prepared = prepare_references(thumbs, [True, False, True, True, False, True])
    rows = [4, 0, 2]
    taken = prepared.take(rows)
    zoom = [False, True, True]
    np.testing.assert_allclose(
        verify_scores(query, taken, zoom), verify_scores(query, thumbs[rows], zoom), atol=1e-5
    )
    assert verify_scores(query, taken, zoom)[0] > 0.9
    with pytest.raises(ValueError, match="zoom-in"):
        verify_scores(query, prepared.take([1]), True)  # row 1 was prepared without it


def test_window_norms_are_each_windows_centred_norm() -> None:
    """The integral-image norms (both tables in one pass) against each window computed alone."""
    from splitaudit.indexer.match.verify import WINDOW, _window_norms

    rng = np.random.default_rng(3)
    band = rng.normal(0, 30, (2, 27, 27)).astype(np.float32)
    norms = _window_norms(band)
    assert norms.shape == (2, 27 - WINDOW + 1, 27 - WINDOW + 1)
    for k in range(2):
        for y in range(norms.shape[1]):
            for x in range(norms.shape[2]):
                window = band[k, y : y + WINDOW, x : x + WINDOW].astype(np.float64)
                expected = np.linalg.norm(window - window.mean())
                assert norms[k, y, x] == pytest.approx(expected, rel=1e-5)


def test_prepared_windows_stay_float32() -> None:
    """The verifier's windows are float32 on every numpy: a float64 scalar in the normalisation
    used to make numpy 2 return float64 references (numpy 1.26 kept float32), so each query's
    ~2,900 x 576 windows were copied to float64 for every product (~5x its CPU)."""
    from splitaudit.indexer.match.verify import _normalise_rows, query_variants

    photo = natural_photo(11)
    rows = np.random.default_rng(0).normal(0, 20, (3, 576)).astype(np.float32)
    assert _normalise_rows(rows).dtype == np.float32
    assert prepare_references([lowres(photo, 32)]).vectors.dtype == np.float32
    variants = query_variants(lowres(photo, 48))
    assert variants.windows.dtype == np.float32
    assert variants.template.dtype == np.float32


def test_query_windows_are_the_search_areas_windows_in_order() -> None:
    """Row ``((scale * 2 + mirrored) * side + y) * side + x`` of the query's windows is the
    window at (x, y) of that scale's search area (mirrored: the area flipped left-right)."""
    from splitaudit.indexer.match.verify import (
        MAX_SHIFT,
        SCALES,
        WINDOW,
        _band_pass,
        _search_area,
        query_variants,
    )

    thumb = verify_thumbnail(lowres(natural_photo(12), 64))
    windows = query_variants(thumb).windows
    side = 2 * MAX_SHIFT + 1
    assert windows.shape == (len(SCALES) * 2 * side * side, WINDOW * WINDOW)
    gray = Image.fromarray(thumb, "L")
    for s in (0, SCALES.index(1.0), len(SCALES) - 1):
        n = round(THUMB_SIZE * SCALES[s])
        pixels = np.asarray(gray.resize((n, n), Image.Resampling.BILINEAR), np.float32)
        area = _search_area(_band_pass(pixels[None])[0])
        for mirrored, view in enumerate((area, area[:, ::-1])):
            for y, x in ((0, 0), (3, 7), (side - 1, side - 1)):
                row = ((s * 2 + mirrored) * side + y) * side + x
                expected = view[y : y + WINDOW, x : x + WINDOW].reshape(-1)
                np.testing.assert_array_equal(windows[row], expected)
