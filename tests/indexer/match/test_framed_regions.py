"""Framed regions: the rectangles a page shows pictures in, found from its straight edges."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PIL import Image, ImageDraw
from skimage import data

from splitaudit.indexer.match import framed_regions
from splitaudit.indexer.match.framed_regions import MAX_FRAMES, framed_boxes


def _photo(name: str, size: tuple[int, int]) -> Image.Image:
    pixels = getattr(data, name)()
    image = Image.fromarray(pixels).convert("RGB")
    return image.resize(size, Image.Resampling.LANCZOS)


def _page(size: tuple[int, int] = (1280, 800)) -> Image.Image:
    """A light page with a dark header and grey text lines, like a screenshot."""
    page = Image.new("RGB", size, (250, 250, 252))
    draw = ImageDraw.Draw(page)
    draw.rectangle((0, 0, size[0], 60), fill=(40, 60, 120))
    for k in range(22):
        y = 90 + 30 * k
        draw.rectangle((40, y, 40 + 300 + 37 * (k % 7) * 5, y + 10), fill=(190, 190, 196))
    return page


def _fractions(box: tuple[int, int, int, int], size: tuple[int, int]) -> tuple[float, ...]:
    return (box[0] / size[0], box[1] / size[1], box[2] / size[0], box[3] / size[1])


@pytest.mark.parametrize(
    ("name", "place"),
    [("astronaut", (700, 300, 1060, 540)), ("coffee", (100, 420, 400, 620))],
)
def test_a_photo_pasted_over_a_page_is_framed_along_its_edges(
    name: str, place: tuple[int, int, int, int]
) -> None:
    page = _page()
    x0, y0, x1, y1 = place
    page.paste(_photo(name, (x1 - x0, y1 - y0)), (x0, y0))
    boxes = framed_boxes(page)
    assert boxes, "the pasted photo is not framed"
    assert boxes[0] == pytest.approx(_fractions(place, page.size), abs=0.006)


def test_a_texture_pasted_in_a_page_is_framed_and_its_own_runs_are_not() -> None:
    # grass: every column and row holds runs of steps; only the paste's border is a lone line
    page = _page()
    page.paste(_photo("grass", (300, 300)), (820, 380))
    boxes = framed_boxes(page)
    assert boxes[0] == pytest.approx(_fractions((820, 380, 1120, 680), page.size), abs=0.006)
    # no frame inside the texture: the others lean on the page's lines
    inside = [b for b in boxes if b[0] > 0.64 and b[2] < 0.875 and b[1] > 0.475 and b[3] < 0.85]
    assert inside == []
    assert framed_boxes(_photo("grass", (768, 768))) == []
    assert framed_boxes(_photo("gravel", (768, 768))) == []


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea", "camera", "rocket"])
def test_a_plain_photo_frames_nothing(name: str) -> None:
    assert framed_boxes(_photo(name, (768, 512))) == []


def test_a_page_of_text_lines_frames_nothing() -> None:
    # the header and the lines are rectangles, too thin to hold a picture
    assert framed_boxes(_page()) == []


def test_collage_cells_and_a_photo_at_the_pages_edge_are_framed() -> None:
    # a collage with a 12-px gutter, its first cell against the page's top and left edges (where
    # a photo's own edge is as light as the gutter, its frame may take the gutter in)
    page = Image.new("RGB", (1200, 800), (255, 255, 255))
    page.paste(_photo("coffee", (500, 400)), (0, 0))
    page.paste(_photo("chelsea", (500, 400)), (512, 0))
    boxes = framed_boxes(page)
    assert _near(boxes, _fractions((0, 0, 500, 400), page.size))
    assert _near(boxes, _fractions((512, 0, 1012, 400), page.size))


def test_photos_touching_without_a_gutter_are_not_told_apart() -> None:
    # the line between two touching photos has photo on both sides, like a texture's runs:
    # neither cell is framed (the grid of windows still covers them)
    page = Image.new("RGB", (1500, 800), (255, 255, 255))
    for k, name in enumerate(["astronaut", "chelsea", "coffee"]):
        page.paste(_photo(name, (500, 400)), (500 * k, 0))
    assert not _near(framed_boxes(page), _fractions((0, 0, 500, 400), page.size))


def _near(boxes: list[tuple[float, float, float, float]], box: tuple[float, ...]) -> bool:
    return any(max(abs(a - b) for a, b in zip(found, box, strict=True)) < 0.015 for found in boxes)


def test_at_most_max_frames_are_kept_each_a_picture(monkeypatch: pytest.MonkeyPatch) -> None:
    page = Image.new("RGB", (1280, 960), (245, 245, 245))
    names = ["astronaut", "coffee", "chelsea", "rocket", "camera", "immunohistochemistry"]
    for k, name in enumerate(names):
        page.paste(_photo(name, (300, 240)), (60 + 400 * (k % 3), 80 + 420 * (k // 3)))
    expected = {(60 + 400 * (k % 3), 80 + 420 * (k // 3)) for k in range(len(names))}

    def corners(boxes: list[tuple[float, float, float, float]]) -> set[tuple[int, int]]:
        return {(round(b[0] * 1280), round(b[1] * 960)) for b in boxes}

    def pictures(found: set[tuple[int, int]]) -> bool:
        return all(min(abs(x - ex) + abs(y - ey) for ex, ey in expected) <= 6 for x, y in found)

    boxes = framed_boxes(page)
    assert 4 <= len(boxes) <= MAX_FRAMES and pictures(corners(boxes))
    monkeypatch.setattr(framed_regions, "MAX_FRAMES", 2)
    two = framed_boxes(page)
    assert two == boxes[:2]


def test_small_or_blank_images_frame_nothing() -> None:
    assert framed_boxes(Image.new("RGB", (12, 12))) == []
    assert framed_boxes(Image.new("RGB", (800, 600), (30, 30, 30))) == []
    grey = Image.fromarray(np.full((600, 800), 128, np.uint8))
    assert framed_boxes(grey) == []


def test_grey_and_transparent_pages_are_searched_like_colour_ones() -> None:
    page = _page()
    page.paste(_photo("camera", (320, 320)), (760, 300))
    expected = _fractions((760, 300, 1080, 620), page.size)
    for mode in ("L", "RGBA", "P"):
        boxes = framed_boxes(page.convert(mode))
        assert boxes and boxes[0] == pytest.approx(expected, abs=0.006), mode
    # a panorama's strip is searched at the same scale; too thin a strip frames nothing
    assert framed_boxes(Image.new("RGB", (6000, 150), (200, 200, 200))) == []


def _bridged_by_hand(edges: np.ndarray, gap: int) -> np.ndarray:
    """Along each row: a pixel is filled where an edge lies at most ``gap + 1`` px across it
    (an edge before it and one after it, closer together than ``gap + 2``)."""
    out = edges.copy()
    for r, row in enumerate(edges):
        on = np.flatnonzero(row)
        for a, b in itertools.pairwise(on.tolist()):
            if b - a <= gap + 1:
                out[r, a:b] = True
    return out


@pytest.mark.parametrize("gap", [0, 1, 2, 3])
def test_bridging_fills_gaps_of_at_most_gap_px_and_nothing_else(gap: int) -> None:
    rng = np.random.default_rng(gap)
    for _ in range(40):
        edges = rng.random((int(rng.integers(1, 30)), int(rng.integers(1, 60)))) < rng.random()
        want = _bridged_by_hand(edges, gap)
        assert np.array_equal(framed_regions._bridged(edges, axis=1, gap=gap), want)
        assert np.array_equal(framed_regions._bridged(edges.T, axis=0, gap=gap), want.T)
    # a run ending at the border is not extended past it, a gap one px too wide stays open
    row = np.array([[True, False, False, True, False, False, False, True, False]])
    assert framed_regions._bridged(row, axis=1, gap=2).tolist() == [
        [True, True, True, True, False, False, False, True, False]
    ]


def test_runs_are_each_rows_long_stretches_of_edges() -> None:
    rng = np.random.default_rng(3)
    edges = rng.random((25, 70)) < 0.7
    line, first, end = framed_regions._runs(edges, min_len=4)
    want = []
    for r, row in enumerate(edges):
        c = 0
        while c < len(row):
            if row[c]:
                s = c
                while c < len(row) and row[c]:
                    c += 1
                if c - s >= 4:
                    want.append((r, s, c))
            else:
                c += 1
    assert list(zip(line.tolist(), first.tolist(), end.tolist(), strict=True)) == want
    assert all(len(a) == 0 for a in framed_regions._runs(np.zeros((3, 9), bool), 1))
