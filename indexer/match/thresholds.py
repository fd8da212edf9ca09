"""Per-tier match thresholds and the one rule that turns pair scores into near / semantic.

The engine and ``bench/accuracy`` both call ``Thresholds.near_mask`` / ``classify``, so the
audit applies exactly the rule whose recall and false-positive rate the benchmark measured.
How the defaults were chosen, with the measured tables: ``docs/thresholds.md``.

A pair (test item, corpus item) is *small* when either image's short side is below
``small_side`` px. On small pairs a 64-bit pHash and an ImageNet-CNN embedding both see
mostly blur: unrelated 32-64 px thumbnails reach pHash distance 6 and cosine 0.95. There
hashes and cosines only nominate candidates and the pixel verifier
(``splitaudit.indexer.match.verify``) decides.

A pair is **near** when any of:

1. pHash Hamming distance <= ``phash_hamming`` (the smaller of the test image's plain and
   mirrored pHash against the corpus pHash) -- on a small pair only if the verification
   score is also >= ``small_phash_verify`` (the pixels must not contradict the hash), on a
   large one only if it is not below ``large_phash_verify`` (where it was computed): a
   pair whose pixels agree less than either picture agrees with itself moved 2 px is not
   the same picture, whatever its hash (two smooth tiles under one bright corner). Where the
   embedding disagrees (cosine under ``candidate_cosine``) the score must reach
   ``doubted_verify``: smooth 80-96 px tiles (a retina, a pale sky) and a grey cell image
   with one disc collided with unrelated wallpaper tiles within 2-8 bits at scores
   0.01-0.74, cosine 0.25-0.43, where the hash's true copies under that cosine were turned
   copies, verified at 1.0 (docs/recall.md);
2. geometric verification (``splitaudit.indexer.match.geometry``) finds at least ``geometry_inliers``
   keypoint matches agreeing on one plausible similarity transform (or homography, for a
   picture seen at an angle): the test image is a crop / rotation / overlay of a region of
   the corpus image, or shows it;
3. it is a verification candidate and the verification score is >= ``verify_score``
   (catches shifted / rescaled / recoloured / bordered copies hashes and cosines miss), or
   >= ``doubted_verify`` where the embedding disagrees (cosine under ``candidate_cosine``):
   a single blob on a plain ground aligns with another blob at 0.74-0.78 (a blurred clock
   face against an orange hexagon on purple, cosine 0.14-0.19), where the copies the
   verifier alone finds under that cosine verify at 0.86-1.0, all but one (0.77)
   (docs/recall.md, "Pixels alone against a disagreeing embedding").
   Candidates: cosine >= ``candidate_cosine``, or Hamming <= ``candidate_hamming`` where
   the cosine cannot nominate (a small pair, or no embedding), or, on a small pair, the
   corpus thumbnail is among the test image's nearest by shape descriptor (``shape``: its
   cosine, given only to the pairs that search nominated; ``splitaudit.indexer.features.shape``).
   On larger pairs the embedding is the better judge of "worth a look": hash-only candidates
   there were the unrelated pairs that came closest to the verification threshold.

It is **semantic** when not near, not small, and cosine >= ``semantic_cosine``.

Cosine alone never makes a pair near: it measures *what* is shown, not whether the pixels
are shared (the other third of a symmetric scene reaches cosine 0.9). It nominates
candidates; hashes, the pixel verifier and the geometric match decide. ``near_cosine`` is
the cosine from which a large pair is always geometrically verified, past the engine's
per-image cap (``splitaudit.indexer.match.geometric_tier``).

Missing evidence never matches: pass ``None`` (scalars) or NaN (arrays; a Hamming distance
above 64 for a missing hash). An unknown size (``None`` / NaN) counts as *not* small, so the
caller must pass ``min_side`` (the smaller of the two images' short sides) to get the
small-image protection.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.errors import UsageError

logger = logging.getLogger(__name__)

MatchTier = Literal["near", "semantic"]
ArrayLike = npt.ArrayLike

_HAMMING_FIELDS = ("phash_hamming", "candidate_hamming")
_MAX_INLIERS = 10_000
_UNIT_FIELDS = (
    "near_cosine",
    "semantic_cosine",
    "candidate_cosine",
    "verify_score",
    "small_phash_verify",
    "large_phash_verify",
    "doubted_verify",
)
_MISSING_HAMMING = 65  # farther than any 64-bit distance
DOUBTED_VERIFY = 0.80  # docs/thresholds.md, "Where the embedding disagrees"
_MAX_SIDE = 1_000_000


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Decision thresholds for the near and semantic tiers (see the module docstring).

    Hamming distances are bits of a 64-bit pHash (0-64); cosines and verification scores
    lie in [-1, 1]; ``small_side`` is in pixels. Construct directly, or from user input
    with ``from_mapping``.
    """

    phash_hamming: int
    near_cosine: float
    semantic_cosine: float
    candidate_hamming: int
    candidate_cosine: float
    verify_score: float
    small_side: int
    small_phash_verify: float
    geometry_inliers: int = 12
    large_phash_verify: float = 0.0
    # pixels alone make a pair near at this score where the embedding disagrees (cosine under
    # candidate_cosine); never below verify_score (``pixels_needed``)
    doubted_verify: float = DOUBTED_VERIFY

    def __post_init__(self) -> None:
        for name in _HAMMING_FIELDS:
            value = getattr(self, name)
            if not _is_int(value) or not 0 <= value <= 64:
                raise UsageError(
                    f"threshold {name} must be an integer number of bits in 0..64, got {value!r}"
                )
        if not _is_int(self.small_side) or not 0 <= self.small_side <= _MAX_SIDE:
            raise UsageError(
                f"threshold small_side must be an integer number of pixels in 0..{_MAX_SIDE}, "
                f"got {self.small_side!r}"
            )
        if not _is_int(self.geometry_inliers) or not 3 <= self.geometry_inliers <= _MAX_INLIERS:
            raise UsageError(
                "threshold geometry_inliers must be an integer number of keypoint matches in "
                f"3..{_MAX_INLIERS}, got {self.geometry_inliers!r}"
            )
        for name in _UNIT_FIELDS:
            value = getattr(self, name)
            if not _is_number(value) or not -1.0 <= value <= 1.0:
                raise UsageError(f"threshold {name} must be a number in [-1, 1], got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.semantic_cosine > self.near_cosine:
            raise UsageError(
                f"semantic_cosine ({self.semantic_cosine}) is above near_cosine "
                f"({self.near_cosine}): the semantic tier would never match; lower "
                "semantic_cosine or raise near_cosine"
            )

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, Any], *, base: Thresholds | None = None
    ) -> Thresholds:
        """Thresholds from user input (JSON / CLI): the given keys override ``base``.

        ``base`` defaults to ``DEFAULT_THRESHOLDS``. Raises ``UsageError`` naming the valid
        keys for an unknown key, and the allowed range for a bad value.
        """
        if not isinstance(mapping, Mapping):
            raise UsageError(
                f"thresholds must be a JSON object of name: value, got {type(mapping).__name__}"
            )
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(mapping) - set(names), key=str)
        if unknown:
            raise UsageError(
                f"unknown threshold(s) {', '.join(map(repr, unknown))}; "
                f"valid keys: {', '.join(names)}"
            )
        return replace(base or DEFAULT_THRESHOLDS, **dict(mapping))

    def to_dict(self) -> dict[str, int | float]:
        """Plain ``{name: value}``, as recorded in reports; ``from_mapping`` reads it back."""
        return asdict(self)

    def small_mask(self, min_side: ArrayLike | None) -> npt.NDArray[np.bool_]:
        """Which pairs are small (``min_side`` below ``small_side``; None / NaN = not small)."""
        if min_side is None:
            return np.asarray(False)
        side = np.asarray(min_side, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return side < self.small_side  # type: ignore[no-any-return]

    def candidate_mask(
        self,
        hamming: ArrayLike,
        cosine: ArrayLike,
        min_side: ArrayLike | None = None,
        shape: ArrayLike | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Which pairs are verification candidates by rule 3 (vectorised). ``shape``: the
        shape-descriptor cosine of the pairs a small test image's shape search nominated (NaN
        or None: not nominated)."""
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        small = self.small_mask(min_side)
        hash_nominates = small | np.isnan(cos)
        with np.errstate(invalid="ignore"):
            by_hash = (ham <= self.candidate_hamming) & hash_nominates
            out = by_hash | (cos >= self.candidate_cosine)
            if shape is not None:
                out = out | (small & ~np.isnan(np.asarray(shape, dtype=np.float64)))
            return out  # type: ignore[no-any-return]

    def hash_mask(
        self,
        hamming: ArrayLike,
        verify: ArrayLike,
        small: npt.NDArray[np.bool_],
        cosine: ArrayLike | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Rule 1, vectorised: pHash within ``phash_hamming``, and the verification score
        (NaN: not computed) at least ``small_phash_verify`` on a small pair, not below
        ``large_phash_verify`` on a large one (a missing score does not contradict); where the
        embedding disagrees with the hash (``cosine`` under ``candidate_cosine``; NaN: no
        embedding, no disagreement), at least ``pixels_needed`` (``doubted_verify``), whatever
        the size."""
        ham = np.asarray(hamming, dtype=np.float64)
        ver = np.asarray(verify, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            pixels_agree = np.where(
                small, ver >= self.small_phash_verify, ~(ver < self.large_phash_verify)
            )
            if cosine is not None:
                doubted = np.asarray(cosine, dtype=np.float64) < self.candidate_cosine
                pixels_agree = np.where(doubted, ver >= self.pixels_needed(True), pixels_agree)
            return (ham <= self.phash_hamming) & pixels_agree  # type: ignore[no-any-return]

    def pixels_needed(self, doubted: bool) -> float:
        """The verification score that makes a pair near by its pixels alone: ``verify_score``,
        or where the embedding disagrees (``doubted``) ``doubted_verify``, never less."""
        return max(self.verify_score, self.doubted_verify) if doubted else self.verify_score

    def verify_mask(
        self,
        hamming: ArrayLike,
        cosine: ArrayLike,
        verify: ArrayLike,
        min_side: ArrayLike | None = None,
        shape: ArrayLike | None = None,
    ) -> npt.NDArray[np.bool_]:
        """Rule 3, vectorised: a verification candidate whose score reaches ``verify_score``,
        or ``doubted_verify`` where the embedding disagrees (cosine under ``candidate_cosine``;
        NaN: no embedding, no disagreement)."""
        cos = np.asarray(cosine, dtype=np.float64)
        ver = np.asarray(verify, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            needed = np.where(
                cos < self.candidate_cosine, self.pixels_needed(True), self.verify_score
            )
            candidate = self.candidate_mask(hamming, cos, min_side, shape)
            return (ver >= needed) & candidate  # type: ignore[no-any-return]

    def near_mask(
        self,
        hamming: ArrayLike,
        cosine: ArrayLike,
        verify: ArrayLike,
        min_side: ArrayLike | None = None,
        geometry: ArrayLike | None = None,
        shape: ArrayLike | None = None,
    ) -> npt.NDArray[np.bool_]:
        """The near rule, vectorised over pairs (``shape``: as for ``candidate_mask``).

        ``geometry`` is the number of keypoint matches supporting a plausible transform
        (``GeometricMatch.support``; NaN / None = not run). A support of
        ``-geometry_inliers`` or below is a fit of that many inliers whose aligned images agree
        only on a shared overlay (watermark, logo, caption bands, frame, window chrome), or that
        stands on test keypoints the fits to other, different corpus images share
        (``burstiness``): the pair is not near, whatever its hash or verification score.
        """
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        ver = np.asarray(verify, dtype=np.float64)
        geo = np.asarray(np.nan if geometry is None else geometry, dtype=np.float64)
        small = self.small_mask(min_side)
        with np.errstate(invalid="ignore"):
            by_hash = self.hash_mask(ham, ver, small, cos)
            verified = self.verify_mask(ham, cos, ver, min_side, shape)
            located = geo >= self.geometry_inliers
            overlay = geo <= -self.geometry_inliers  # a fit on a shared overlay only
            return (by_hash | verified | located) & ~overlay  # type: ignore[no-any-return]

    def semantic_mask(
        self,
        hamming: ArrayLike,
        cosine: ArrayLike,
        verify: ArrayLike,
        min_side: ArrayLike | None = None,
        geometry: ArrayLike | None = None,
        content_cosine: ArrayLike | None = None,
        shape: ArrayLike | None = None,
    ) -> npt.NDArray[np.bool_]:
        """The semantic rule, vectorised: cosine >= ``semantic_cosine``, not small, not near.

        ``content_cosine``: for a pair whose geometric fit was refused as an overlay, the cosine
        of the two images' content region alone (``content_region.content_cosine``; NaN: none);
        such a pair is semantic only if that is at or above ``semantic_cosine`` too. Pairs
        without one (NaN, or None for all) keep the rule as it was."""
        cos = np.asarray(cosine, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            similar = (cos >= self.semantic_cosine) & ~self.small_mask(min_side)
            if content_cosine is not None:
                similar &= ~(np.asarray(content_cosine, np.float64) < self.semantic_cosine)
            near = self.near_mask(hamming, cos, verify, min_side, geometry, shape)
            return similar & ~near  # type: ignore[no-any-return]

    def is_candidate(
        self,
        hamming: int | None,
        cosine: float | None,
        min_side: int | None = None,
        shape: float | None = None,
    ) -> bool:
        """Whether one pair is a verification candidate by rule 3."""
        return bool(self.candidate_mask(_ham(hamming), _num(cosine), _num(min_side), _num(shape)))

    def needs_verify(
        self,
        hamming: int | None,
        cosine: float | None,
        min_side: int | None = None,
        shape: float | None = None,
    ) -> bool:
        """Whether a verification score could change this pair's verdict (compute it then).

        A large pair (its size known) near by its hash alone is verified too: the audit then
        hands it to the geometric step (``geometric_tier.shortlist``), whose content check
        refuses a hash that only a shared overlay (frame, window chrome, logo) brought close.
        """
        return bool(
            self.needs_verify_mask(_ham(hamming), _num(cosine), _num(min_side), _num(shape))
        )

    def needs_verify_mask(
        self,
        hamming: ArrayLike,
        cosine: ArrayLike,
        min_side: ArrayLike | None = None,
        shape: ArrayLike | None = None,
    ) -> npt.NDArray[np.bool_]:
        """``needs_verify`` over arrays of pairs (missing values as ``_ham`` / NaN): the
        engine asks it of every candidate of a chunk at once (one call per pair cost ~50 us,
        a third of a thumbnail dedup's engine phase)."""
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        side = np.asarray(np.nan if min_side is None else min_side, dtype=np.float64)
        hashed = ham <= self.phash_hamming
        with np.errstate(invalid="ignore"):
            confirms = hashed & (side >= self.small_side)  # NaN (unknown size): False
        near = self.near_mask(ham, cos, np.nan, side, None, shape)
        candidate = self.candidate_mask(ham, cos, side, shape)
        return confirms | (~near & (hashed | candidate))  # type: ignore[no-any-return]

    def needs_verify_many(
        self,
        hamming: Sequence[int | None],
        cosine: Sequence[float | None],
        min_side: Sequence[int | None],
        shape: Sequence[float | None] | None = None,
    ) -> npt.NDArray[np.bool_]:
        """``needs_verify`` of many pairs (``None`` = missing, as there)."""
        return self.needs_verify_mask(
            _hams(hamming),
            _nums(cosine),
            _nums(min_side),
            None if shape is None else _nums(shape),
        )

    def confirms(self, hamming: int | None, min_side: int | None) -> bool:
        """Whether a pair near by its hash goes on to the geometric step to confirm it rests on
        content: a large pair of known size (SIFT needs the pixels a thumbnail lacks)."""
        if hamming is None or hamming > self.phash_hamming or min_side is None:
            return False
        return min_side >= self.small_side

    def is_near(
        self,
        hamming: int | None,
        cosine: float | None,
        verify: float | None = None,
        min_side: int | None = None,
        geometry: int | None = None,
        shape: float | None = None,
    ) -> bool:
        """Whether one pair is a near duplicate (``None`` = missing / not run / unknown)."""
        args = (_ham(hamming), _num(cosine), _num(verify), _num(min_side), _num(geometry))
        return bool(self.near_mask(*args, _num(shape)))

    def near_many(
        self,
        hamming: Sequence[int | None],
        cosine: Sequence[float | None],
        verify: Sequence[float | None],
        min_side: Sequence[int | None],
        shape: Sequence[float | None] | None = None,
    ) -> list[bool]:
        """``is_near`` of many pairs without a geometric match, in one vectorised call (a test
        image's candidates: ``is_near`` a pair at a time cost ~25 us each, ~5% of a thumbnail
        corpus's dedup)."""
        near = self.near_mask(
            _hams(hamming),
            _nums(cosine),
            _nums(verify),
            _nums(min_side),
            None,
            None if shape is None else _nums(shape),
        )
        return [bool(v) for v in near.tolist()]

    def classify(
        self,
        hamming: int | None,
        cosine: float | None,
        verify: float | None = None,
        min_side: int | None = None,
        geometry: int | None = None,
        content_cosine: float | None = None,
        shape: float | None = None,
    ) -> MatchTier | None:
        """``"near"``, ``"semantic"`` or ``None`` for one pair (exact matches are decided earlier).

        ``min_side`` is the smaller of the two images' short sides in pixels; ``geometry`` the
        supporting keypoint matches of a geometric match (``None`` = not run);
        ``content_cosine`` the content-only cosine of a fit refused as an overlay
        (``semantic_mask``; ``None`` = none).
        """
        args = (_ham(hamming), _num(cosine), _num(verify), _num(min_side), _num(geometry))
        if self.near_mask(*args, _num(shape)):
            return "near"
        if self.semantic_mask(*args, _num(content_cosine), _num(shape)):
            return "semantic"
        return None

    def classify_many(
        self,
        hamming: Sequence[int | None],
        cosine: Sequence[float | None],
        verify: Sequence[float | None],
        min_side: Sequence[int | None],
        geometry: Sequence[int | None],
        content_cosine: Sequence[float | None],
        shape: Sequence[float | None] | None = None,
    ) -> list[tuple[MatchTier | None, list[str]]]:
        """``classify`` and, for a near pair, ``near_evidence``, of many pairs at once: the
        rule masks run once over arrays instead of once per pair on one-element arrays
        (150,000 pairs of mixed evidence: 0.31-0.34 CPU-s against 6.4-6.5 one by one, same run).
        Same verdicts and reasons."""
        ham = _hams(hamming)
        cos, ver, side, geo, content = (
            _nums(values) for values in (cosine, verify, min_side, geometry, content_cosine)
        )
        shp = None if shape is None else _nums(shape)
        near = self.near_mask(ham, cos, ver, side, geo, shp)
        semantic = self.semantic_mask(ham, cos, ver, side, geo, content, shp)
        small = self.small_mask(side)
        with np.errstate(invalid="ignore"):  # a near pair is no overlay-only fit (near_mask)
            by_hash = self.hash_mask(ham, ver, small, cos)
            verified = self.verify_mask(ham, cos, ver, side, shp)
            located = geo >= self.geometry_inliers
        rules = [
            (name, mask.tolist())
            for name, mask in (("phash", by_hash), ("verify", verified), ("geometry", located))
        ]
        out: list[tuple[MatchTier | None, list[str]]] = []
        for i, (is_near, is_semantic) in enumerate(
            zip(near.tolist(), semantic.tolist(), strict=True)
        ):
            if is_near:
                out.append(("near", [name for name, mask in rules if mask[i]]))
            else:
                out.append(("semantic" if is_semantic else None, []))
        return out

    def near_evidence(
        self,
        hamming: int | None,
        cosine: float | None,
        verify: float | None = None,
        min_side: int | None = None,
        geometry: int | None = None,
        shape: float | None = None,
    ) -> list[str]:
        """Which near criteria one pair meets (``phash``, ``verify``, ``geometry``), for its evidence."""
        if _num(geometry) <= -self.geometry_inliers:  # a fit on a shared overlay: no rule holds
            return []
        ham, ver = _ham(hamming), _num(verify)
        reasons = []
        if self.hash_mask(ham, ver, self.small_mask(_num(min_side)), _num(cosine)):
            reasons.append("phash")
        if self.verify_mask(ham, _num(cosine), ver, _num(min_side), _num(shape)):
            reasons.append("verify")
        if _num(geometry) >= self.geometry_inliers:
            reasons.append("geometry")
        return reasons


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ham(value: int | None) -> float:
    return float(_MISSING_HAMMING if value is None else value)


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _hams(values: Sequence[int | None]) -> npt.NDArray[np.float64]:
    """``_ham`` of each value, as an array."""
    return np.fromiter((_ham(v) for v in values), np.float64, len(values))


def _nums(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    """``_num`` of each value, as an array."""
    return np.fromiter((_num(v) for v in values), np.float64, len(values))


# Chosen from the measured curves of `python -m bench.accuracy` (efficientnet-lite0, the
# bundled offline model) and checked on a second, held-out benchmark draw: see
# docs/thresholds.md for the tables, the operating point and each margin.
DEFAULT_THRESHOLDS = Thresholds(
    phash_hamming=8,
    near_cosine=0.80,
    semantic_cosine=0.70,
    candidate_hamming=20,
    candidate_cosine=0.50,
    verify_score=0.70,
    small_side=96,
    small_phash_verify=0.40,
)

# Cosine scales differ per embedding model; hash and verification thresholds do not.
MODEL_THRESHOLDS: dict[str, Thresholds] = {
    "efficientnet-lite0:imagenet": DEFAULT_THRESHOLDS,
}

# Starting values for ViT-B/32-class CLIP models, used only where a corpus cannot calibrate its
# own (``splitaudit.indexer.match.corpus_thresholds``: precomputed embeddings without image bytes, too few
# items). Sources: clip-retrieval deduplicates its results at cosine 0.94
# (github.com/rom1504/clip-retrieval); SemDeDup (Abbas et al. 2023, arXiv:2303.09540) calls LAION
# pairs within cosine distance 0.01-0.07 semantic duplicates (cosine 0.93-0.99); unrelated photos
# of one kind of thing commonly sit at 0.70-0.85 under ViT-B/32, so candidates start at 0.80.
LITERATURE_CLIP: dict[str, float] = {
    "near_cosine": 0.94,
    "semantic_cosine": 0.90,
    "candidate_cosine": 0.80,
}
LITERATURE_SOURCES = (
    "clip-retrieval result deduplication at cosine 0.94 (github.com/rom1504/clip-retrieval)",
    "SemDeDup, Abbas et al. 2023, arXiv:2303.09540: semantic duplicates within cosine "
    "distance 0.01-0.07 on LAION",
)


def thresholds_for_model(model_id: str | None) -> Thresholds:
    """Model-level defaults: measured ones, else the literature CLIP starting values (logged).

    Never another model's cosines. Audits use the corpus's own record instead
    (``splitaudit.indexer.match.corpus_thresholds.thresholds_for_corpus``), calibrated at index time.
    """
    if model_id is None:
        return DEFAULT_THRESHOLDS
    if model_id in MODEL_THRESHOLDS:
        return MODEL_THRESHOLDS[model_id]
    logger.warning(
        "no measured thresholds for model %s; using literature starting values for CLIP-class "
        "models (an indexed corpus calibrates its own, see docs/thresholds.md)",
        model_id,
    )
    return replace(
        DEFAULT_THRESHOLDS,
        near_cosine=LITERATURE_CLIP["near_cosine"],
        semantic_cosine=LITERATURE_CLIP["semantic_cosine"],
        candidate_cosine=LITERATURE_CLIP["candidate_cosine"],
    )
