"""Dense low-resolution alignment of small pairs (issue 23): a re-scraped 32-px copy, shifted,
zoomed, recoloured and re-encoded, aligns; other parts of the same photo, a periodic texture's
neighbouring tile and flat thumbnails do not."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageFilter

from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match.low_res_align import ALIGNED_NEAR, aligned_scores, prepare_query
from splitaudit.indexer.match.verify import verify_thumbnail


def _cut(image: Image.Image, cx: float, cy: float, side: float, size: int = 32) -> Image.Image:
    box = (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)
    return image.resize((size, size), Image.Resampling.LANCZOS, box=box)


def _rescraped(image: Image.Image) -> Image.Image:
    """Lower contrast, then JPEG at quality 60: how a re-scraped thumbnail differs."""
    buf = io.BytesIO()
    ImageEnhance.Contrast(image).enhance(0.85).save(buf, format="JPEG", quality=60)
    buf.seek(0)
    return Image.open(buf).convert("RGB")


@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    return sample_photo("astronaut")


@pytest.mark.parametrize(
    ("cx", "cy", "dx", "dy", "zoom"),
    [
        (226.2, 383.3, 14.8, 5.6, 1.09),  # 3.7 px right at 32 px: the verifier scores 0.67
        (336.9, 128.7, 10.8, -14.4, 1.14),
        (226.2, 383.3, -12.0, 8.0, 0.8),  # zoomed out
    ],
)
def test_a_shifted_zoomed_recoloured_copy_aligns(
    astronaut: Image.Image, cx: float, cy: float, dx: float, dy: float, zoom: float
) -> None:
    source = verify_thumbnail(_cut(astronaut, cx, cy, 128))
    copy = _rescraped(_cut(astronaut, cx + dx, cy + dy, 128 / zoom))
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR


def test_other_parts_of_the_same_photo_do_not_align(astronaut: Image.Image) -> None:
    centres = [(x, y) for x in (100.0, 230.0, 360.0) for y in (100.0, 230.0, 360.0)]
    references = np.stack([verify_thumbnail(_cut(astronaut, x, y, 128)) for x, y in centres])
    for n, (x, y) in enumerate(centres):
        query = prepare_query(_rescraped(_cut(astronaut, x + 6, y - 6, 128)))
        scores = aligned_scores(query, references)
        assert scores[n] >= ALIGNED_NEAR  # its own tile, for contrast
        assert np.delete(scores, n).max() < ALIGNED_NEAR, (n, scores)


def test_a_periodic_textures_neighbouring_tiles_do_not_align() -> None:
    """A 3 x 3 grid of 48-px tiles of a brick wall: each tile is nearly a shifted copy of every
    other (the wall repeats), so only an alignment better than the wall's own repeats counts."""
    brick = sample_photo("brick")
    step, start = 0.8 * brick.width / 3, 0.1 * brick.width
    tiles = [
        _cut(brick, start + step * (c + 0.5), start + step * (r + 0.5), step, 48)
        for r in range(3)
        for c in range(3)
    ]
    references = np.stack([verify_thumbnail(t) for t in tiles])
    for n, tile in enumerate(tiles):
        scores = aligned_scores(tile, references)
        assert scores[n] >= ALIGNED_NEAR
        assert np.delete(scores, n).max() < ALIGNED_NEAR, (n, scores)


def test_flat_thumbnails_never_align() -> None:
    flat = Image.new("RGB", (32, 32), (120, 130, 200))
    other = verify_thumbnail(Image.new("RGB", (32, 32), (118, 131, 205)))
    assert aligned_scores(flat, other[None])[0] == -1.0


def test_a_refinement_that_lands_off_the_copy_does_not_cost_it(
    astronaut: Image.Image, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ECC fits the raw thumbnails, not the band the score correlates: where its fit is worse
    for the score than the coarse search's (here: forced 2 px off), the coarse warp is kept."""
    from splitaudit.indexer.match import low_res_align

    source = verify_thumbnail(_cut(astronaut, 226.2, 383.3, 128))
    copy = prepare_query(_rescraped(_cut(astronaut, 226.2 + 10.8, 383.3 - 8.0, 128 / 1.1)))

    def off(reference: object, query: object, warp: np.ndarray) -> np.ndarray:
        moved = warp.copy()
        moved[:, 2] += 2.0
        return moved

    def kept(reference: object, query: object, warp: np.ndarray) -> np.ndarray:
        return warp

    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR  # ECC's own fit
    monkeypatch.setattr(low_res_align, "_refined", kept)
    coarse = aligned_scores(copy, source[None])[0]
    monkeypatch.setattr(low_res_align, "_refined", off)
    assert aligned_scores(copy, source[None])[0] == pytest.approx(coarse)
    assert coarse > 0.5


def test_a_copy_whose_finest_detail_the_rescrape_blurred_still_aligns(
    astronaut: Image.Image,
) -> None:
    """Resampling and JPEG blur a copy's finest band; the pair is scored in a slightly coarser
    band too (``SCORE_SIGMAS``), where the copy's detail survives."""
    source = verify_thumbnail(_cut(astronaut, 307.2, 307.2, 128))
    blurred = _cut(astronaut, 317.2, 302.2, 128 / 1.1).filter(ImageFilter.GaussianBlur(0.8))
    buf = io.BytesIO()
    ImageEnhance.Contrast(blurred).enhance(0.85).save(buf, format="JPEG", quality=50)
    buf.seek(0)
    copy = Image.open(buf).convert("RGB")
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR


@pytest.mark.parametrize(("dx", "dy", "zoom"), [(14.8, 5.6, 1.09), (-12.0, 8.0, 0.8)])
def test_where_ecc_gives_no_fit_the_direct_search_aligns_the_copy(
    astronaut: Image.Image, monkeypatch: pytest.MonkeyPatch, dx: float, dy: float, zoom: float
) -> None:
    """ECC's fit refused (as on a tile ruled by a rim or a horizon, where it drifts to an
    anisotropic warp): the similarity search from the coarse warp still aligns a re-cut copy
    (the coarse warp alone scores these 0.74 and 0.60)."""
    from splitaudit.indexer.match import low_res_align

    def refused(reference: object, query: object, warp: np.ndarray) -> np.ndarray:
        return warp

    monkeypatch.setattr(low_res_align, "_refined", refused)
    source = verify_thumbnail(_cut(astronaut, 226.2, 383.3, 128))
    copy = _rescraped(_cut(astronaut, 226.2 + dx, 383.3 + dy, 128 / zoom))
    assert aligned_scores(copy, source[None])[0] >= ALIGNED_NEAR
