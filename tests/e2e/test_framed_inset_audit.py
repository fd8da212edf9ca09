"""End to end through the CLI with the bundled model: corpus photos shown at 30% of a slide and
in a collage are near, with their boxes on the test image, once the frames around them are cut
out as regions; a collage of photos the corpus does not hold stays clean (issue 23).

Textures are the hard case: a grass or gravel photo inset at 30% is mostly page in every window
of the region grid, and its embedding there is far from its source (cosine 0.2-0.3, under what a
region needs to nominate it); cut along its own edges it embeds as itself. The same audit run
with frames switched off misses them, so the tests below fail without the frame rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli_audit_support import audit_folders, audit_report, index_corpus, paste_fitted
from helpers.cli_audit import near_matches
from PIL import Image, ImageDraw, ImageOps

from splitaudit.indexer.demo import sample_photo

pytestmark = pytest.mark.slow
Box = tuple[float, float, float, float]
CORPUS = ("grass", "gravel", "coffee", "rocket", "camera")


def slide(photo: Image.Image, fraction: float, at: tuple[float, float]) -> tuple[Image.Image, Box]:
    """A dark presentation slide (title bar, bullet lines) showing ``photo`` fitted in
    ``fraction`` of its side with its top-left at ``at``; the slide and the photo's box."""
    w, h = 1200, 900
    canvas = Image.new("RGB", (w, h), (24, 36, 64))
    draw = ImageDraw.Draw(canvas)
    draw.rectangle((0, 0, w, 110), fill=(200, 90, 40))
    for k in range(8):
        y = 180 + 70 * k
        draw.ellipse((60, y, 76, y + 16), fill=(230, 230, 230))
        draw.rectangle((100, y + 2, 100 + 60 * (3 + k % 4), y + 14), fill=(210, 214, 220))
    return canvas, paste_fitted(canvas, photo, fraction, at)


def collage(names: list[str], cell: int = 330, gutter: int = 16) -> tuple[Image.Image, list[Box]]:
    """A 3 x 3 grid of photos on white with gutters, each cut to a square around its centre
    (as collage tools fill a cell); the image and each cell's box."""
    side = 3 * cell + 4 * gutter
    canvas = Image.new("RGB", (side, side), (255, 255, 255))
    boxes = []
    for k, name in enumerate(names):
        x, y = gutter + (k % 3) * (cell + gutter), gutter + (k // 3) * (cell + gutter)
        canvas.paste(
            ImageOps.fit(sample_photo(name), (cell, cell), Image.Resampling.LANCZOS), (x, y)
        )
        boxes.append((x / side, y / side, (x + cell) / side, (y + cell) / side))
    return canvas, boxes


def _audit(root: Path, home: Path, split: Path, frames: bool) -> dict:
    from splitaudit.indexer.match import framed_regions, quad_regions

    # frames off: the axis-aligned ones and the quadrilaterals (an upright picture is one too)
    off = [
        (framed_regions, "framed_boxes", lambda image: []),
        (quad_regions, "pictures_at_an_angle", lambda image, frames: []),
    ]
    return audit_report(split, home, root / f"report-{frames}.json", None if frames else off)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict[str, Box]]:
    root = tmp_path_factory.mktemp("framed-audit")
    corpus, split, home = audit_folders(root)
    for name in CORPUS:
        sample_photo(name).save(corpus / f"{name}.png")
    boxes: dict[str, Box] = {}
    for name, at in (("grass", (0.62, 0.3)), ("gravel", (0.6, 0.55))):
        shot, boxes[name] = slide(sample_photo(name), 0.3, at)
        shot.save(split / f"slide_{name}.png")
    # the corpus's coffee in the middle cell among photos it does not hold
    grid, cells = collage(
        [
            *("astronaut", "chelsea", "immunohistochemistry", "clock", "coffee"),
            "hubble_deep_field",
            "retina",
            "page",
            "brick",
        ]
    )
    grid.save(split / "collage.png")
    boxes["collage"] = cells[4]
    other, _ = collage(
        [
            "astronaut",
            "chelsea",
            "immunohistochemistry",
            "clock",
            "moon",
            "hubble_deep_field",
            "retina",
            "page",
            "brick",
        ]
    )
    other.save(split / "collage_unrelated.png")
    index_corpus(corpus, home)
    return _audit(root, home, split, True), _audit(root, home, split, False), boxes


@pytest.mark.parametrize("name", ["grass", "gravel"])
def test_a_texture_on_a_slide_at_30_percent_is_near_with_its_box(
    audited: tuple[dict, dict, dict[str, Box]], name: str
) -> None:
    report, _, boxes = audited
    near = near_matches(report, f"slide_{name}.png")
    assert set(near) == {f"{name}.png"}
    geometry = near[f"{name}.png"]["evidence"]["geometry"]
    assert geometry["inset"] is True
    assert np.allclose(geometry["test_box"], boxes[name], atol=0.02), geometry["test_box"]


def test_without_frames_the_grass_slide_is_missed(
    audited: tuple[dict, dict, dict[str, Box]],
) -> None:
    # the grid's windows alone do not nominate it (the same audit, frames switched off)
    _, without, _ = audited
    assert near_matches(without, "slide_grass.png") == {}


def test_a_corpus_photo_in_a_collage_cell_is_near_with_the_cells_box(
    audited: tuple[dict, dict, dict[str, Box]],
) -> None:
    report, _, boxes = audited
    near = near_matches(report, "collage.png")
    assert set(near) == {"coffee.png"}
    x0, y0, x1, y1 = near["coffee.png"]["evidence"]["geometry"]["test_box"]
    cx0, cy0, cx1, cy1 = boxes["collage"]
    # the cell shows the photo's middle square: the box is the whole photo's outline, as tall
    # as the cell and reaching past it on both sides
    assert abs(y0 - cy0) < 0.02 and abs(y1 - cy1) < 0.02, (y0, y1)
    assert x0 < cx0 and x1 > cx1 and abs((x0 + x1) / 2 - (cx0 + cx1) / 2) < 0.02, (x0, x1)


def test_a_collage_of_photos_the_corpus_does_not_hold_matches_nothing(
    audited: tuple[dict, dict, dict[str, Box]],
) -> None:
    report, _, _ = audited
    assert near_matches(report, "collage_unrelated.png") == {}
