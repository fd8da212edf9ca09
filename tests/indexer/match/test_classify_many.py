"""``Thresholds.classify_many`` / ``pair.classify_all`` against the one-pair rules they replace
in the engine (``Thresholds.classify`` and ``near_evidence``): the same verdict and the same near
reasons for every combination of evidence, missing values included, around each threshold."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from types import SimpleNamespace

from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.match.pair import Pair, classify_all
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS, Thresholds

TH = DEFAULT_THRESHOLDS


def _values(th: Thresholds) -> dict[str, list]:
    """Each piece of evidence at, just under and just over its thresholds, and missing."""
    return {
        "hamming": [None, 0, th.phash_hamming, th.phash_hamming + 1, th.candidate_hamming, 40],
        "cosine": [
            None,
            0.2,
            th.candidate_cosine,
            th.semantic_cosine - 1e-6,
            th.semantic_cosine,
            th.near_cosine,
            0.99,
        ],
        "verify": [
            None,
            0.1,
            th.small_phash_verify,
            th.verify_score - 1e-6,
            th.verify_score,
            th.doubted_verify - 1e-6,
            th.doubted_verify,
            0.95,
        ],
        "min_side": [None, 32, th.small_side - 1, th.small_side, 400],
        "geometry": [
            None,
            -th.geometry_inliers - 5,
            -th.geometry_inliers,
            0,
            th.geometry_inliers - 1,
            th.geometry_inliers,
            200,
        ],
        "content": [None, th.semantic_cosine - 0.01, th.semantic_cosine, 0.9],
        "shape": [None, 0.9],  # nominated by a small test image's shape search, or not
    }


def _expected(th: Thresholds, h, c, v, s, g, cc, sh) -> tuple[str | None, list[str]]:
    kind = th.classify(h, c, v, s, g, cc, sh)
    return kind, th.near_evidence(h, c, v, s, g, sh) if kind == "near" else []


def test_every_combination_of_evidence_classifies_as_one_pair_at_a_time() -> None:
    values = _values(TH)
    combos = list(itertools.product(*values.values()))  # 161,280 pairs
    got = TH.classify_many(*(list(column) for column in zip(*combos, strict=True)))
    kinds = {kind for kind, _rules in got}
    assert kinds == {"near", "semantic", None}  # the grid reaches every verdict
    assert any(rules == ["phash", "verify", "geometry"] for _k, rules in got)
    for combo, verdict in zip(combos, got, strict=True):
        assert verdict == _expected(TH, *combo), combo


def test_classify_all_sets_kinds_and_rules_as_the_engine_needs() -> None:
    rng = random.Random(7)
    values = _values(TH)
    pairs: list[Pair] = []
    for n in range(3_000):
        h, c, v, s, g, cc, sh = (rng.choice(column) for column in values.values())
        p = Pair(row=n, item_id=n, hamming=h, cosine=c, verify=v, min_side=s, content_cosine=cc)
        p.shape = sh
        if g is not None:
            p.geometry = SimpleNamespace(support=g)  # type: ignore[assignment]  # what it reads
        p.sha_equal = n % 97 == 0  # an exact copy whatever its other evidence
        p.rules = ["stale"]
        pairs.append(p)
    classify_all(pairs, TH)
    for p in pairs:
        if p.sha_equal:
            assert p.kind == MatchKind.EXACT
            continue
        g = None if p.geometry is None else p.geometry.support
        kind, rules = _expected(
            TH, p.hamming, p.cosine, p.verify, p.min_side, g, p.content_cosine, p.shape
        )
        assert p.kind == kind
        assert p.rules == (rules if kind == "near" else ["stale"])  # untouched unless near
    assert {p.kind for p in pairs} == {MatchKind.EXACT, "near", "semantic", None}


def test_a_shape_nomination_makes_a_small_pair_a_candidate_and_only_a_small_one() -> None:
    """A small copy whose pHash (25 bits) and cosine (0.3) nominate nothing is near by its
    verification score once its shape search nominated it; a large pair is not."""
    assert TH.classify(25, 0.3, 0.85, 32) is None
    assert TH.classify(25, 0.3, 0.85, 32, shape=0.9) == "near"
    assert TH.near_evidence(25, 0.3, 0.85, 32, shape=0.9) == ["verify"]
    assert TH.classify(25, 0.3, 0.85, 400, shape=0.9) is None
    assert TH.classify(25, 0.3, 0.6, 32, shape=0.9) is None  # the pixels still decide
    assert TH.needs_verify(25, 0.3, 32, shape=0.9) and not TH.needs_verify(25, 0.3, 32)
    got = TH.needs_verify_many([25, 25], [0.3, 0.3], [32, 32], [0.9, None]).tolist()
    assert got == [True, False]
    assert TH.near_many([25, 25], [0.3, 0.3], [0.85, 0.85], [32, 32], [0.9, None]) == [True, False]


def test_a_hash_the_embedding_disagrees_with_needs_the_doubted_threshold() -> None:
    """pHash within the near radius, cosine under ``candidate_cosine``: near only at
    ``doubted_verify`` (a turned copy verifies at 1.0; smooth unrelated tiles and a blob on a
    plain ground reached 0.01-0.74), at any size; with an agreeing or no embedding the size's
    own floor stays."""
    low = TH.candidate_cosine - 0.1
    assert TH.verify_score < TH.doubted_verify < 1.0
    for side in (32, 96, 400):
        assert TH.classify(2, low, TH.doubted_verify - 0.01, side) is None
        assert TH.classify(2, low, TH.doubted_verify, side) == "near"
        assert "phash" in TH.near_evidence(2, low, 1.0, side)
    assert TH.classify(2, TH.candidate_cosine, 0.45, 32) == "near"  # small floor 0.40
    assert TH.classify(2, None, 0.45, 32) == "near"  # no embedding: no disagreement
    assert TH.classify(2, 0.9, 0.05, 400) == "near"  # large floor 0
    assert TH.classify(2, low, None, 400) is None  # no score: nothing confirms the hash


def test_pixels_alone_the_embedding_disagrees_with_need_the_doubted_threshold() -> None:
    """Rule 3 on a small pair its hash (15 bits) or its shape nominated: at a cosine under
    ``candidate_cosine`` the verifier alone makes it near only at ``doubted_verify`` (a blurred
    clock face aligned with an orange hexagon at 0.78, cosine 0.14); with an agreeing or no
    embedding ``verify_score`` as before; a geometric fit is not doubted; and the doubted floor
    is never under ``verify_score``."""
    low = TH.candidate_cosine - 0.1
    for shape in (None, 0.9):
        assert TH.classify(15, low, TH.doubted_verify - 0.01, 32, shape=shape) is None
        assert TH.classify(15, low, TH.doubted_verify, 32, shape=shape) == "near"
        assert TH.near_evidence(15, low, TH.doubted_verify, 32, shape=shape) == ["verify"]
        assert not TH.near_evidence(15, low, TH.doubted_verify - 0.01, 32, shape=shape)
    assert TH.classify(15, TH.candidate_cosine, TH.verify_score, 32) == "near"
    assert TH.classify(15, None, TH.verify_score, 32) == "near"  # no embedding: not doubted
    assert TH.classify(None, low, 0.1, 400, geometry=TH.geometry_inliers) == "near"
    got = TH.classify_many(
        [15, 15, 15], [low, low, 0.6], [0.75, 0.9, 0.75], [32, 32, 32], [None] * 3, [None] * 3
    )
    assert got == [(None, []), ("near", ["verify"]), ("near", ["verify"])]
    strict = replace(TH, verify_score=0.9, doubted_verify=0.8)  # the higher of the two
    assert strict.pixels_needed(True) == 0.9 and strict.pixels_needed(False) == 0.9
    assert strict.classify(15, low, 0.85, 32) is None
    assert strict.classify(15, low, 0.9, 32) == "near"


def test_no_pairs() -> None:
    assert TH.classify_many([], [], [], [], [], []) == []
    classify_all([], TH)
