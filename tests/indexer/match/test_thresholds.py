"""Thresholds: validation, round trips, and the near / semantic rule."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.match.thresholds import (
    DEFAULT_THRESHOLDS,
    MODEL_THRESHOLDS,
    Thresholds,
    thresholds_for_model,
)

RULE = Thresholds(
    phash_hamming=8,
    near_cosine=0.8,
    semantic_cosine=0.7,
    candidate_hamming=20,
    candidate_cosine=0.5,
    verify_score=0.7,
    small_side=96,
    small_phash_verify=0.4,
)


def test_to_dict_round_trips_through_json() -> None:
    text = json.dumps(DEFAULT_THRESHOLDS.to_dict())
    assert Thresholds.from_mapping(json.loads(text)) == DEFAULT_THRESHOLDS


def test_from_mapping_overrides_only_the_given_keys() -> None:
    custom = Thresholds.from_mapping({"phash_hamming": 4, "verify_score": 0.9}, base=RULE)
    assert custom.phash_hamming == 4
    assert custom.verify_score == 0.9
    assert custom.near_cosine == RULE.near_cosine
    assert custom.small_side == RULE.small_side


def test_empty_mapping_gives_the_defaults() -> None:
    assert Thresholds.from_mapping({}) == DEFAULT_THRESHOLDS


def test_integer_cosines_are_accepted_as_floats() -> None:
    assert Thresholds.from_mapping({"near_cosine": 1}).near_cosine == 1.0


def test_unknown_key_is_a_usage_error_naming_the_valid_keys() -> None:
    with pytest.raises(
        UsageError, match=r"unknown threshold.*'phash_distance'.*valid keys: phash_hamming"
    ):
        Thresholds.from_mapping({"phash_distance": 4})


@pytest.mark.parametrize(
    "changes",
    [
        {"phash_hamming": 65},
        {"phash_hamming": -1},
        {"phash_hamming": 4.5},
        {"phash_hamming": True},
        {"candidate_hamming": "10"},
        {"near_cosine": 1.5},
        {"semantic_cosine": -2},
        {"candidate_cosine": None},
        {"verify_score": "high"},
        {"verify_score": math.nan},
        {"small_phash_verify": 1.01},
        {"large_phash_verify": -1.5},
        {"doubted_verify": 1.2},
        {"doubted_verify": "high"},
        {"small_side": -1},
        {"small_side": 32.0},
    ],
)
def test_out_of_range_or_wrong_type_is_a_usage_error(changes: dict[str, object]) -> None:
    with pytest.raises(UsageError, match="must be"):
        Thresholds.from_mapping(changes)


def test_semantic_above_near_is_refused() -> None:
    with pytest.raises(UsageError, match=r"semantic_cosine .* above near_cosine"):
        Thresholds.from_mapping({"semantic_cosine": 0.9, "near_cosine": 0.85})


def test_a_mapping_is_required() -> None:
    with pytest.raises(UsageError, match="JSON object"):
        Thresholds.from_mapping([("phash_hamming", 4)])  # type: ignore[arg-type]


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(UsageError):
        replace(RULE, near_cosine=2.0)


def test_near_by_phash_alone_on_large_or_unknown_sizes() -> None:
    assert RULE.is_near(8, None)
    assert RULE.is_near(8, None, min_side=200)
    assert not RULE.is_near(9, None, min_side=200)


def test_phash_match_on_small_images_needs_the_pixels_to_agree() -> None:
    assert not RULE.is_near(2, None, min_side=32)  # not verified yet
    assert not RULE.is_near(2, None, verify=0.39, min_side=32)
    assert RULE.is_near(2, None, verify=0.4, min_side=32)


def test_phash_match_on_large_images_must_not_be_contradicted_by_the_pixels() -> None:
    """A large pair near by its pHash alone whose verification score is below
    ``large_phash_verify`` (its pixels agree less than either picture with itself moved 2 px)
    is not near: two smooth tiles under one bright corner, 4 bits apart. Where the score was
    not computed the hash stands, and a geometric match still makes the pair near."""
    assert DEFAULT_THRESHOLDS.large_phash_verify == RULE.large_phash_verify == 0.0
    assert RULE.is_near(4, None, verify=None, min_side=200)
    assert RULE.is_near(4, None, verify=0.0, min_side=200)
    assert not RULE.is_near(4, None, verify=-0.3, min_side=200)
    assert not RULE.is_near(4, None, verify=-0.3)  # an unknown size counts as large
    assert RULE.near_mask([4, 4], [np.nan] * 2, [-0.3, np.nan], [200, 200]).tolist() == [
        False,
        True,
    ]
    assert RULE.is_near(4, None, verify=-0.3, min_side=200, geometry=12)
    assert RULE.near_evidence(4, None, -0.3, 200, 12) == ["geometry"]
    assert RULE.near_evidence(4, None, 0.1, 200) == ["phash"]
    assert RULE.classify(4, 0.6, -0.3, min_side=200) is None
    assert replace(RULE, large_phash_verify=-1.0).is_near(4, None, verify=-1.0, min_side=200)


def test_cosine_alone_never_makes_near() -> None:
    assert not RULE.is_near(None, 0.99)
    assert not RULE.is_near(40, 0.95, min_side=200)
    assert RULE.classify(40, 0.95, min_side=200) == "semantic"


def test_geometric_match_makes_near_from_the_inlier_threshold() -> None:
    assert RULE.geometry_inliers == 12
    assert RULE.is_near(40, 0.6, min_side=200, geometry=12)
    assert not RULE.is_near(40, 0.6, min_side=200, geometry=11)
    assert RULE.classify(40, 0.75, min_side=200, geometry=0) == "semantic"
    assert RULE.classify(40, 0.75, min_side=200, geometry=30) == "near"
    assert RULE.near_evidence(40, 0.75, None, 200, 30) == ["geometry"]


def test_geometry_inliers_must_be_a_sane_integer() -> None:
    assert Thresholds.from_mapping({"geometry_inliers": 20}).geometry_inliers == 20
    for bad in (2, 12.5, True, "12"):
        with pytest.raises(UsageError, match="geometry_inliers must be an integer"):
            Thresholds.from_mapping({"geometry_inliers": bad})


def test_verification_counts_only_for_candidates() -> None:
    assert RULE.is_near(30, 0.55, verify=0.75, min_side=32)  # candidate by cosine
    assert RULE.is_near(18, None, verify=0.75, min_side=32)  # candidate by hash
    assert not RULE.is_near(30, 0.3, verify=0.99, min_side=32)  # not a candidate
    assert not RULE.is_near(18, 0.6, verify=0.69, min_side=32)
    assert not RULE.is_near(18, 0.6, verify=None, min_side=32)


def test_hash_nominates_candidates_only_where_cosine_cannot() -> None:
    assert RULE.is_candidate(18, None, min_side=200)  # no embedding
    assert RULE.is_candidate(18, 0.3, min_side=32)  # small pair
    assert not RULE.is_candidate(18, 0.3, min_side=200)  # large pair: the cosine says no
    assert not RULE.is_near(18, 0.3, verify=0.99, min_side=200)
    assert RULE.is_near(18, None, verify=0.75, min_side=200)


def test_needs_verify_only_when_the_verdict_could_change() -> None:
    assert RULE.needs_verify(15, None)
    assert RULE.needs_verify(40, 0.9, min_side=32)
    assert RULE.needs_verify(5, None, min_side=32)  # small: the hash match must be verified
    assert not RULE.needs_verify(5, None)  # already near by hash
    assert RULE.needs_verify(40, 0.9, min_side=200)  # cosine alone is not near: verify
    assert not RULE.needs_verify(40, 0.2)  # not a candidate
    assert not RULE.needs_verify(15, 0.3, min_side=200)  # large: hash alone does not nominate
    assert not RULE.needs_verify(None, None)


def test_classify_tiers() -> None:
    assert RULE.classify(3, None) == "near"
    assert RULE.classify(40, 0.75, min_side=200) == "semantic"
    assert RULE.classify(40, 0.75, min_side=32) is None  # small images: cosine is not evidence
    assert RULE.classify(40, 0.75, verify=0.9, min_side=32) == "near"
    assert RULE.classify(40, 0.6) is None
    assert RULE.classify(None, None, None) is None


def test_near_evidence_names_the_criteria_met() -> None:
    assert RULE.near_evidence(4, 0.9, 0.8) == ["phash", "verify"]
    assert RULE.near_evidence(30, 0.9, 0.8, min_side=32) == ["verify"]
    assert RULE.near_evidence(4, None, 0.5, min_side=32) == ["phash"]
    assert RULE.near_evidence(4, None, 0.3, min_side=32) == []
    assert RULE.near_evidence(30, 0.4, 0.8) == []


def test_vectorised_masks_agree_with_the_scalar_rule() -> None:
    rng = np.random.default_rng(0)
    n = 500
    hamming = rng.integers(0, 40, n)
    cosine = rng.uniform(0.2, 1.0, n)
    verify = rng.uniform(-0.2, 1.0, n)
    side = rng.choice([32, 64, 128, 512], n)
    near = RULE.near_mask(hamming, cosine, verify, side)
    semantic = RULE.semantic_mask(hamming, cosine, verify, side)
    for i in range(n):
        args = (int(hamming[i]), float(cosine[i]), float(verify[i]), int(side[i]))
        assert near[i] == RULE.is_near(*args)
        assert (RULE.classify(*args) == "semantic") == semantic[i]
    assert near.any() and (~near).any() and semantic.any()


def test_masks_treat_nan_as_missing_evidence() -> None:
    hamming = [65, 65, 3, 3]
    cosine = [np.nan, 0.9, np.nan, np.nan]
    verify = [0.99, np.nan, np.nan, np.nan]
    min_side = [np.nan, np.nan, 10, np.nan]
    assert RULE.near_mask(hamming, cosine, verify, min_side).tolist() == [False, False, False, True]
    geometry = [np.nan, 12, np.nan, np.nan]
    assert RULE.near_mask(hamming, cosine, verify, min_side, geometry).tolist()[1]


def test_thresholds_for_model() -> None:
    assert (
        thresholds_for_model("efficientnet-lite0:imagenet")
        is MODEL_THRESHOLDS["efficientnet-lite0:imagenet"]
    )
    assert thresholds_for_model(None) is DEFAULT_THRESHOLDS
    # never another model's cosines: an unmeasured model starts from the CLIP literature values
    unmeasured = thresholds_for_model("open_clip:some-unmeasured-model")
    assert unmeasured.near_cosine == 0.94 and unmeasured.semantic_cosine == 0.90
    assert unmeasured.near_cosine != DEFAULT_THRESHOLDS.near_cosine
    assert unmeasured.phash_hamming == DEFAULT_THRESHOLDS.phash_hamming


def test_needs_verify_many_follows_the_rule_pair_by_pair() -> None:
    """The engine asks ``needs_verify_many`` of a chunk's candidates at once; every mix of
    missing and present evidence gets the answer of the rule written out one pair at a time
    (a large pair near by its hash is confirmed; a pair near already is not verified; else a
    hash within the near radius or a candidate is)."""
    hams: list[int | None] = [None, 0, 5, RULE.phash_hamming, RULE.phash_hamming + 1, 15, 20, 40]
    cosines: list[float | None] = [None, 0.2, RULE.candidate_cosine, 0.9, 0.99]
    sides: list[int | None] = [None, 32, RULE.small_side - 1, RULE.small_side, 200]
    grid = [(h, c, s) for h in hams for c in cosines for s in sides]

    def written_out(h: int | None, c: float | None, s: int | None) -> bool:
        if RULE.confirms(h, s):
            return True
        if RULE.is_near(h, c, None, s):
            return False
        return (h is not None and h <= RULE.phash_hamming) or RULE.is_candidate(h, c, s)

    many = RULE.needs_verify_many(*zip(*grid, strict=True))
    expected = [written_out(*g) for g in grid]
    assert many.tolist() == expected
    assert [RULE.needs_verify(*g) for g in grid] == expected
    assert 0 < sum(expected) < len(grid)


def test_near_many_is_is_near_of_each_pair() -> None:
    """A test image's candidates are settled in one vectorised call (``near_many``): the same
    verdict as ``is_near`` a pair at a time, missing values included."""
    th = DEFAULT_THRESHOLDS
    values = itertools.product(
        (None, 0, th.phash_hamming, th.phash_hamming + 1, 30),
        (None, 0.3, th.candidate_cosine, 0.9),
        (None, -0.3, th.large_phash_verify, 0.2, th.small_phash_verify, th.verify_score, 0.95),
        (None, 32, th.small_side, 400),
    )
    pairs = list(values)
    got = th.near_many(*(list(column) for column in zip(*pairs, strict=True)))
    assert got == [th.is_near(*pair) for pair in pairs]
    assert 0 < sum(got) < len(pairs)
    assert th.near_many([], [], [], []) == []
