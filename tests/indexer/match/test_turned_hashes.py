"""A small pair near by its pHash only in a turned orientation needs the verifier's
``verify_score`` (``small_pairs.confirm_turned_hashes``): a single blob is within the near
radius of any other blob in some one of the eight orientations the hash tier searches."""

from __future__ import annotations

import pytest

from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.small_pairs import confirm_turned_hashes
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS

TH = DEFAULT_THRESHOLDS


def _pair(orientation: str, verify: float, min_side: int = 64, hamming: int = 8) -> Pair:
    return Pair(
        0,
        1,
        hamming=hamming,
        orientation=orientation,
        cosine=0.6,  # the embedding agrees: rule 1 alone asks small_phash_verify
        verify=verify,
        min_side=min_side,
    )  # type: ignore[arg-type]


def _near(p: Pair) -> bool:
    return TH.is_near(p.hamming, p.cosine, p.verify, p.min_side)


@pytest.mark.parametrize("turn", ["rot90", "rot180", "rot270", "flip", "transpose", "transverse"])
def test_a_turned_hash_with_a_weak_verifier_score_is_not_near(turn: str) -> None:
    p = _pair(turn, 0.40 + 0.01)
    assert _near(p)  # the small-pair hash rule alone would call it near
    confirm_turned_hashes([p], TH)
    assert p.hamming is None and p.unconfirmed_turned_hamming == 8 and not _near(p)
    assert p.evidence()["unconfirmed_turned_phash"] == {"phash_hamming": 8, "orientation": turn}


def test_a_turned_copy_the_verifier_confirms_stays_near() -> None:
    p = _pair("rot90", TH.verify_score + 0.2)
    confirm_turned_hashes([p], TH)
    assert p.hamming == 8 and p.unconfirmed_turned_hamming is None and _near(p)
    assert p.evidence()["orientation"] == "rot90"


@pytest.mark.parametrize("orientation", ["identity", "mirror"])
def test_upright_and_mirrored_hashes_keep_the_small_pair_rule(orientation: str) -> None:
    p = _pair(orientation, 0.41)
    confirm_turned_hashes([p], TH)
    assert p.hamming == 8 and _near(p)


def test_large_pairs_are_left_to_the_geometric_step() -> None:
    p = _pair("rot90", 0.41, min_side=TH.small_side + 100)
    confirm_turned_hashes([p], TH)
    assert p.hamming == 8


def test_hashes_beyond_the_near_radius_are_not_touched() -> None:
    p = _pair("rot90", 0.41, hamming=TH.phash_hamming + 4)
    confirm_turned_hashes([p], TH)
    assert p.hamming == TH.phash_hamming + 4 and p.unconfirmed_turned_hamming is None
