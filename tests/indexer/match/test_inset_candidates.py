"""Region candidates for insets (issue 23): which test images get regions, and how region hits
become (row, corpus item) candidates."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from splitaudit.indexer.errors import ImageDecodeError
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.match.inset_candidates import (
    FRAMES_MIN_SIDE,
    INSET_MIN_SIDE,
    REGION_DECODE_SIDE,
    REGION_TOP_K,
    RegionHit,
    RegionVectors,
    region_boxes,
    region_candidates,
    region_crops,
    region_decode,
    region_fraction,
)


def test_only_large_files_get_regions_cut_from_their_reduced_decode() -> None:
    small, large = Image.new("RGB", (300, 200)), Image.new("RGB", (256, 160))
    crops, rows, boxes = region_crops(
        [small, large], first_row=7, sizes=[(300, 200), (1280, INSET_MIN_SIDE + 400)]
    )
    assert rows.tolist() == [8] * 9 and boxes.shape == (
        9,
        4,
    )  # the small file gets none; the reduced decode of a large one 9
    assert {c.size for c in crops} <= {(115, 72), (116, 72)}  # 45% of the 256 x 160 decode


def test_regions_are_cut_from_the_larger_decode_where_one_is_given() -> None:
    small, large = Image.new("RGB", (256, 160)), Image.new("RGB", (768, 480))
    sizes = [(1280, 800), (1280, 800)]
    crops, rows, _ = region_crops(
        [small, small], 0, sizes, larger=lambda n: large if n == 1 else None
    )
    assert rows.tolist() == [0] * 9 + [1] * 9
    # row 0: no larger decode, cut from the reduced one; row 1: 45% of the 768 x 480 decode
    assert {c.size for c in crops[:9]} <= {(115, 72), (116, 72)}
    assert {c.size for c in crops[9:]} <= {(345, 216), (346, 216)}


def _grid(n: int) -> npt.NDArray[np.float64]:
    """The boxes of the first ``n`` grid regions."""
    return np.asarray([region_fraction(k % 9) for k in range(n)], np.float64)


def test_a_picture_framed_in_a_page_is_cut_along_its_edges_after_the_grid() -> None:
    from skimage import data

    page = Image.new("RGB", (1280, 800), (250, 250, 252))
    photo = Image.fromarray(data.astronaut()).resize((360, 240), Image.Resampling.LANCZOS)
    page.paste(photo, (700, 300))
    crops, rows, boxes = region_crops([page], 4, [page.size])
    assert rows.tolist() == [4] * 10  # the nine windows, then the one framed picture
    assert boxes[:9] == pytest.approx(_grid(9), abs=1e-3)
    assert boxes[9] == pytest.approx((700 / 1280, 300 / 800, 1060 / 1280, 540 / 800), abs=0.005)
    assert abs(crops[9].width - 360) <= 3 and abs(crops[9].height - 240) <= 3


def test_a_page_under_inset_min_side_gets_the_pictures_it_frames_and_no_grid() -> None:
    from skimage import data

    photo = Image.fromarray(data.astronaut()).resize((240, 160), Image.Resampling.LANCZOS)
    page = Image.new("RGB", (640, 360), (250, 250, 252))
    page.paste(photo, (350, 120))
    short = Image.new("RGB", (640, FRAMES_MIN_SIDE - 1), (250, 250, 252))
    short.paste(photo, (350, 20))
    plain = Image.fromarray(data.coffee()).resize((480, 320), Image.Resampling.LANCZOS)
    sizes = [page.size, short.size, plain.size]
    crops, rows, boxes = region_crops([page, short, plain], 0, sizes)
    # no grid under INSET_MIN_SIDE: the page's one framed picture; nothing under
    # FRAMES_MIN_SIDE; a plain photo frames nothing
    assert rows.tolist() == [0]
    assert boxes[0] == pytest.approx((350 / 640, 120 / 360, 590 / 640, 280 / 360), abs=0.01)
    assert abs(crops[0].width - 240) <= 3 and abs(crops[0].height - 160) <= 3
    assert FRAMES_MIN_SIDE < 360 < INSET_MIN_SIDE


def _png(image: Image.Image, fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def test_region_decode_reduces_the_long_side_and_keeps_small_files_as_they_are() -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (900, 1600, 3), dtype=np.uint8)
    big = region_decode(_png(Image.fromarray(pixels)))
    assert big.mode == "RGB" and big.size == (REGION_DECODE_SIDE, 432)
    assert region_decode(_png(Image.fromarray(pixels[:500, :600]))).size == (600, 500)
    # the decode follows the pixels: the left half bright, the right half dark
    split = np.zeros((900, 1600, 3), np.uint8)
    split[:, :800] = 255
    out = np.asarray(region_decode(_png(Image.fromarray(split))))
    assert out[:, :380].min() == 255 and out[:, -380:].max() == 0


def test_region_decode_refuses_bytes_that_are_no_image() -> None:
    with pytest.raises(ImageDecodeError):
        region_decode(b"not an image at all")


Search = Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
]


def _search_returning(scores: list[list[float]], ids: list[list[int]]) -> Search:
    """A vector search double: the given (regions x k) scores and ids, whatever the vectors."""

    def search(
        vectors: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        assert len(vectors) == len(scores)
        return np.asarray(scores, np.float32)[:, :k], np.asarray(ids, np.int64)[:, :k]

    return search


def test_each_rows_best_region_hits_above_the_floor_become_candidates() -> None:
    regions = RegionVectors(np.asarray([0, 0, 3]), np.zeros((3, 4), np.float32), _grid(3))
    search = _search_returning(
        [[0.9, 0.7, 0.4], [0.8, 0.75, 0.6], [0.45, 0.3, 0.2]],
        [[11, 12, 13], [12, 14, 15], [11, -1, 12]],
    )
    found = region_candidates(search, regions, floor=0.5)
    # row 0: item 12 is seen by two regions (best 0.8 kept); top 3 by cosine: 11, 12, 14
    assert set(found) == {(0, 11), (0, 12), (0, 14)}
    hits = [found[(0, 11)], found[(0, 12)], found[(0, 14)]]
    assert np.allclose([h.cosine for h in hits], [0.9, 0.8, 0.75])
    # each hit names the row's region it came from (row 0's first and second regions)
    assert [h.region for h in hits] == [0, 1, 1]
    assert len(found) <= REGION_TOP_K * 2
    assert region_candidates(search, RegionVectors.concat([], 4), floor=0.5) == {}


def test_corpus_images_the_geometric_step_cannot_match_give_way_to_those_it_can() -> None:
    # one large test image, its two regions: the page itself comes closest to small tiles
    # (11, 12, 13: a text-like page), the inset's source (20) ranks under them
    regions = RegionVectors(np.asarray([5, 5]), np.zeros((2, 4), np.float32), _grid(2))
    search = _search_returning(
        [[0.52, 0.505, 0.49, 0.47], [0.51, 0.5, 0.45, 0.41]],
        [[11, 12, 13, 21], [11, 13, 20, 22]],
    )
    asked: list[list[int]] = []

    def large(ids: list[int]) -> set[int]:
        asked.append(ids)
        return {i for i in ids if i >= 20}

    found = region_candidates(search, regions, floor=0.4, kept=2, eligible=large)
    assert asked == [[11, 12, 13, 20, 21, 22]]
    assert {key: hit.cosine for key, hit in found.items()} == pytest.approx(
        {(5, 21): 0.47, (5, 20): 0.45}
    )
    assert found[(5, 21)].region == 0 and found[(5, 20)].region == 1
    # without the filter the small tiles fill the test image's slots
    assert set(region_candidates(search, regions, floor=0.4, kept=2)) == {(5, 11), (5, 12)}


def test_each_regions_own_nearest_is_kept_past_the_best_across_regions() -> None:
    # the page's canvas region comes close to three look-alike corpus pictures (31-33), the
    # framed inset's region to its source (40) less close: the source keeps its slot
    regions = RegionVectors(np.asarray([4, 4]), np.zeros((2, 4), np.float32), _grid(2))
    search = _search_returning(
        [[0.78, 0.77, 0.65, 0.6], [0.55, 0.52, 0.3, 0.2]],
        [[31, 32, 33, 34], [40, 31, 35, 36]],
    )
    found = region_candidates(search, regions, floor=0.4, kept=3, eligible=lambda ids: ids)
    assert set(found) == {(4, 31), (4, 32), (4, 33), (4, 40)}
    assert found[(4, 40)].region == 1 and found[(4, 40)].cosine == pytest.approx(0.55)
    # a region's nearest must still pass the floor and be one the geometric step can match
    assert (4, 40) not in region_candidates(search, regions, floor=0.6, kept=3)
    small = region_candidates(
        search, regions, floor=0.4, kept=3, eligible=lambda ids: [i for i in ids if i != 40]
    )
    assert set(small) == {(4, 31), (4, 32), (4, 33)}  # region 1's nearest allowed one: 31


def test_a_large_jpeg_is_decoded_at_the_dct_scale_the_side_needs() -> None:
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 255, (900, 1600, 3), dtype=np.uint8)
    data = _png(Image.fromarray(pixels), "JPEG")
    # the ingestion's fixed 256 request would give 800 x 450 pixels to reduce from
    assert region_decode(data, side=1280).size == (1280, 720)
    assert region_decode(data).size == (REGION_DECODE_SIDE, 432)
    with pytest.raises(ValueError, match="pixels_only"):
        decode_image(data, draft=(1280, 1280))


def test_a_rows_regions_are_numbered_from_its_first_one_in_region_boxes_order() -> None:
    # two large test images (rows 2 and 7), nine regions each; item 30 is closest to row 7's
    # sixth region (the middle row's right-hand window)
    rows = np.repeat(np.asarray([2, 7]), 9)
    regions = RegionVectors(rows, np.zeros((18, 4), np.float32), np.tile(_grid(9), (2, 1)))
    scores = np.full((18, 1), 0.6, np.float32)
    scores[9 + 5] = 0.9
    ids = np.where(np.arange(18)[:, None] < 9, 40, 30)
    found = region_candidates(_search_returning(scores.tolist(), ids.tolist()), regions, 0.5)
    hit = found[(7, 30)]
    assert isinstance(hit, RegionHit) and hit.region == 5 and hit.cosine == pytest.approx(0.9)
    assert hit.box == pytest.approx(region_fraction(5))  # the region's own box travels with it
    assert found[(2, 40)].region == 0  # equal cosines: the first region keeps it
    assert region_fraction(5) == pytest.approx((0.55, 0.275, 1.0, 0.725))
    boxes = region_boxes(1000, 800)
    for n, (x0, y0, x1, y1) in enumerate(boxes):
        assert np.allclose(
            region_fraction(n), (x0 / 1000, y0 / 800, x1 / 1000, y1 / 800), atol=1e-3
        )
    with pytest.raises(ValueError, match=r"region must be in 0\.\.8"):
        region_fraction(9)
