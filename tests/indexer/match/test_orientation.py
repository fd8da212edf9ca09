"""The eight orientations: their pHashes from one DCT block, and verification turned back."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageFilter

from splitaudit.indexer.features.hashes import hamming
from splitaudit.indexer.features.perceptual import (
    ORIENTATIONS,
    inverse_orientation,
    orient,
    orient_array,
    oriented_phashes,
    perceptual_hashes,
    phash,
)
from splitaudit.indexer.match.orientation import closest_turn, oriented_verify_scores
from splitaudit.indexer.match.verify import verify_thumbnail


def _photo(seed: int, size: tuple[int, int] = (120, 90)) -> Image.Image:
    """A smooth random picture with structure at several scales (no symmetry)."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (size[1] // 10, size[0] // 10, 3), dtype=np.uint8)
    image = Image.fromarray(coarse, "RGB").resize(size, Image.Resampling.BICUBIC)
    noise = rng.integers(-30, 30, (size[1], size[0], 3))
    pixels = np.clip(np.asarray(image, np.int16) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, "RGB").filter(ImageFilter.GaussianBlur(0.8))


def test_orientations_are_the_dihedral_group() -> None:
    assert len(set(ORIENTATIONS)) == 8 and ORIENTATIONS[:2] == ("identity", "mirror")
    image = _photo(0)
    for name in ORIENTATIONS:
        back = orient(orient(image, name), inverse_orientation(name))
        assert np.array_equal(np.asarray(back), np.asarray(image)), name
        pixels = np.asarray(image.convert("L"))
        assert np.array_equal(
            orient_array(pixels, name), np.asarray(orient(image, name).convert("L"))
        ), name


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_oriented_phash_finds_the_source_of_a_turned_copy(seed: int) -> None:
    source = _photo(seed)
    value = phash(source).value
    for name in ORIENTATIONS:
        hashes = oriented_phashes(orient(source, name))
        distances = [hamming(h, value) for h in hashes]
        # the entry for the orientation applied matches the source; a wrong one does not
        assert distances[ORIENTATIONS.index(name)] <= 3, (name, distances)
        assert sorted(distances)[1] > 10 or len(set(distances)) < 8, (name, distances)


def test_the_first_two_oriented_phashes_are_the_stored_ones() -> None:
    image = _photo(4)
    hashes = perceptual_hashes(image)
    assert oriented_phashes(image)[:2] == (hashes.phash, hashes.phash_mirror)


def test_verification_turns_the_query_back_and_keeps_the_upright_score() -> None:
    source, other = _photo(5, (64, 64)), _photo(6, (64, 64))
    thumbs = np.stack([verify_thumbnail(source), verify_thumbnail(other)])
    turned = orient(source, "rot90")
    scores, found = oriented_verify_scores(turned, ["rot90", "rot90"], thumbs)
    assert scores[0] > 0.9 and found[0] == "rot90"
    assert scores[1] < 0.5
    # upright pairs with a turned closest hash keep their upright alignment
    scores, found = oriented_verify_scores(source, ["rot270", "identity"], thumbs)
    assert scores[0] > 0.9 and found[0] == "identity"
    plain, _ = oriented_verify_scores(turned, ["identity", "identity"], thumbs)
    assert plain[0] < 0.5  # the verifier alone does not align quarter turns


@pytest.mark.parametrize("name", ORIENTATIONS)
def test_every_orientation_of_a_thumbnail_verifies_turned_back(name: str) -> None:
    source = _photo(7, (48, 48))
    thumbs = np.stack([verify_thumbnail(source)])
    scores, found = oriented_verify_scores(orient(source, name), [name], thumbs)  # type: ignore[arg-type]
    assert scores[0] > 0.9
    assert found[0] in (name, "identity" if name == "mirror" else name)


def test_the_closest_turn_of_a_turned_copy_is_found_from_its_eight_phashes() -> None:
    source = _photo(11)
    corpus = int(phash(source))
    signed = corpus - (1 << 64) if corpus >= 1 << 63 else corpus  # as the database stores it
    for name in ("flip", "rot90", "rot180", "transverse"):
        test = orient(source, name)
        oriented = np.asarray(oriented_phashes(test), np.uint64)
        upright = hamming(int(oriented[0]), corpus)
        found = closest_turn(oriented, signed, upright)
        assert found is not None and found[1] == name, (name, found)
        assert found[0] < upright and found[0] <= 2
        # a pair already as close as that keeps its orientation
        assert closest_turn(oriented, signed, found[0]) is None


def test_an_upright_copy_gets_no_turn() -> None:
    source = _photo(12)
    oriented = np.asarray(oriented_phashes(source.resize((100, 75))), np.uint64)
    corpus = int(phash(source))
    assert closest_turn(oriented, corpus, hamming(int(oriented[0]), corpus)) is None
    with pytest.raises(ValueError, match="one pHash per orientation"):
        closest_turn(oriented[:2], corpus, None)
