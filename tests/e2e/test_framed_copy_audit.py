"""End to end through the CLI: a copy re-posted in a plain frame or between letterbox bars is
near, and an unrelated picture in the same frame as a corpus image is not (``border_trim``).

The corpus pictures are 32-px tiles of sample photos upscaled to 256 px, smooth as
``bench.dedup_photos``' tiles; there, before 0.5.0, a hash-only dedup missed 12% of the pairs
with a copy in a 4-px black frame (pHash 8-18 bits away, verification scores up to 0.68)."""

from __future__ import annotations

import pytest
from helpers.cli_audit import index_and_audit, near_matches
from helpers.photo_tiles import jpeg_copy, letterboxed
from helpers.photo_tiles import photo_tile as tile
from PIL import Image, ImageOps

from splitaudit.indexer.demo import sample_photo

pytestmark = pytest.mark.slow


def in_frame(image: Image.Image) -> Image.Image:
    """Shrunk into a 20-px black frame, as a gallery page shows it."""
    return ImageOps.expand(image.resize((216, 216)), border=20, fill=(0, 0, 0))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str) -> dict:
    root = tmp_path_factory.mktemp("framed")
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    tile("astronaut", 128, 128).save(corpus / "suit.png")
    tile("coffee", 320, 64).save(corpus / "cup.png")
    in_frame(tile("astronaut", 256, 0)).save(corpus / "framed_face.png")
    sample_photo("rocket").resize((256, 256)).save(corpus / "rocket.png")
    ImageOps.expand(tile("astronaut", 128, 128), border=4, fill=(0, 0, 0)).save(split / "a.png")
    jpeg_copy(letterboxed(tile("coffee", 320, 64), 28), 70).save(split / "b.jpg")
    in_frame(tile("astronaut", 128, 128)).save(split / "c.png")
    return index_and_audit(corpus, split, root / "home", tiny_model_spec)


def test_a_copy_in_a_thin_black_frame_is_near(report: dict) -> None:
    near = near_matches(report, "a.png")
    assert set(near) == {"suit.png"}
    assert near["suit.png"]["evidence"]["verify_score"] >= 0.95


def test_a_letterboxed_reencoded_copy_is_near(report: dict) -> None:
    near = near_matches(report, "b.jpg")
    assert set(near) == {"cup.png"}
    assert near["cup.png"]["evidence"]["verify_score"] >= 0.75


def test_an_unrelated_picture_in_the_same_frame_is_not_near_the_framed_one(report: dict) -> None:
    """c.png is the suit tile in the frame the corpus's face tile wears: near the suit (its
    own picture, framed), not the face."""
    near = near_matches(report, "c.png")
    assert "framed_face.png" not in near
    assert set(near) == {"suit.png"}
