"""Per-tier match thresholds and the one rule that turns pair scores into near / semantic.

The engine and ``bench/accuracy`` both call ``Thresholds.near_mask`` / ``classify``, so the
audit applies exactly the rule whose precision and recall the benchmark measured. How the
defaults were chosen, with the measured table: ``docs/thresholds.md``.

A pair (test item, corpus item) is **near** when any of:

1. pHash Hamming distance <= ``phash_hamming`` (the smaller of the test image's plain and
   mirrored pHash against the corpus pHash);
2. embedding cosine >= ``near_cosine`` and both images have a short side of at least
   ``cosine_min_side`` px (catches crops, overlays, rotations, borders). Below that size an
   ImageNet CNN sees mostly upscaling blur -- unrelated 32-64 px thumbnails reach cosine
   0.95 -- so there cosine only nominates candidates;
3. it is a verification candidate -- Hamming <= ``candidate_hamming`` or cosine >=
   ``candidate_cosine`` -- and ``indexer.audit.verify`` scores it >= ``verify_score``
   (catches shifted / rescaled / recoloured low-resolution copies both hashes miss).

It is **semantic** when not near, cosine >= ``semantic_cosine`` and both images are at least
``cosine_min_side`` px. Missing evidence (no hash, no embedding, verification not run)
never matches: pass ``None`` (scalars) or NaN (arrays; a Hamming distance > 64 for a missing
hash). An unknown size (``None`` / NaN) counts as large.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from indexer.errors import UsageError

logger = logging.getLogger(__name__)

MatchTier = Literal["near", "semantic"]
ArrayLike = npt.ArrayLike

_HAMMING_FIELDS = ("phash_hamming", "candidate_hamming")
_COSINE_FIELDS = ("near_cosine", "semantic_cosine", "candidate_cosine")
_SCORE_FIELDS = ("verify_score",)
_MISSING_HAMMING = 65  # farther than any 64-bit distance
_MAX_SIDE = 1_000_000


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Decision thresholds for the near and semantic tiers (see the module docstring).

    Hamming distances are bits of a 64-bit pHash (0-64); cosines and the verification
    score lie in [-1, 1]; ``cosine_min_side`` is in pixels. Construct directly, or from
    user input with ``from_mapping``.
    """

    phash_hamming: int
    near_cosine: float
    semantic_cosine: float
    cosine_min_side: int
    candidate_hamming: int
    candidate_cosine: float
    verify_score: float

    def __post_init__(self) -> None:
        for name in _HAMMING_FIELDS:
            value = getattr(self, name)
            if not _is_int(value) or not 0 <= value <= 64:
                raise UsageError(f"threshold {name} must be an integer number of bits in 0..64, got {value!r}")
        if not _is_int(self.cosine_min_side) or not 0 <= self.cosine_min_side <= _MAX_SIDE:
            raise UsageError(
                f"threshold cosine_min_side must be an integer number of pixels in 0..{_MAX_SIDE}, "
                f"got {self.cosine_min_side!r}"
            )
        for name in _COSINE_FIELDS + _SCORE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not -1.0 <= value <= 1.0:
                raise UsageError(f"threshold {name} must be a number in [-1, 1], got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.semantic_cosine > self.near_cosine:
            raise UsageError(
                f"semantic_cosine ({self.semantic_cosine}) is above near_cosine ({self.near_cosine}): "
                "the semantic tier would never match; lower semantic_cosine or raise near_cosine"
            )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], *, base: Thresholds | None = None) -> Thresholds:
        """Thresholds from user input (JSON / CLI): the given keys override ``base``.

        ``base`` defaults to ``DEFAULT_THRESHOLDS``. Raises ``UsageError`` naming the valid
        keys for an unknown key, and the allowed range for a bad value.
        """
        if not isinstance(mapping, Mapping):
            raise UsageError(f"thresholds must be a JSON object of name: value, got {type(mapping).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(mapping) - set(names), key=str)
        if unknown:
            raise UsageError(f"unknown threshold(s) {', '.join(map(repr, unknown))}; valid keys: {', '.join(names)}")
        return replace(base or DEFAULT_THRESHOLDS, **dict(mapping))

    def to_dict(self) -> dict[str, int | float]:
        """Plain ``{name: value}``, as recorded in reports; ``from_mapping`` reads it back."""
        return asdict(self)

    def candidate_mask(self, hamming: ArrayLike, cosine: ArrayLike) -> npt.NDArray[np.bool_]:
        """Which pairs are verification candidates (vectorised; NaN / > 64 = missing)."""
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return (ham <= self.candidate_hamming) | (cos >= self.candidate_cosine)  # type: ignore[no-any-return]

    def _cosine_counts(self, min_side: ArrayLike | None) -> npt.NDArray[np.bool_]:
        """Where cosine may decide alone: both images at least ``cosine_min_side`` (NaN = unknown = yes)."""
        if min_side is None:
            return np.asarray(True)
        side = np.asarray(min_side, dtype=np.float64)
        return np.isnan(side) | (side >= self.cosine_min_side)  # type: ignore[no-any-return]

    def near_mask(
        self, hamming: ArrayLike, cosine: ArrayLike, verify: ArrayLike, min_side: ArrayLike | None = None
    ) -> npt.NDArray[np.bool_]:
        """The near rule, vectorised over pairs (NaN / > 64 = missing evidence)."""
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        ver = np.asarray(verify, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            by_hash = ham <= self.phash_hamming
            by_cosine = (cos >= self.near_cosine) & self._cosine_counts(min_side)
            verified = (ver >= self.verify_score) & self.candidate_mask(ham, cos)
            return by_hash | by_cosine | verified  # type: ignore[no-any-return]

    def semantic_mask(
        self, hamming: ArrayLike, cosine: ArrayLike, verify: ArrayLike, min_side: ArrayLike | None = None
    ) -> npt.NDArray[np.bool_]:
        """The semantic rule, vectorised: cosine >= ``semantic_cosine``, large enough, not near."""
        cos = np.asarray(cosine, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            similar = (cos >= self.semantic_cosine) & self._cosine_counts(min_side)
            return similar & ~self.near_mask(hamming, cos, verify, min_side)  # type: ignore[no-any-return]

    def is_candidate(self, hamming: int | None, cosine: float | None) -> bool:
        """Whether one pair is a verification candidate (``None`` = evidence missing)."""
        return bool(self.candidate_mask(_ham(hamming), _num(cosine)))

    def needs_verify(self, hamming: int | None, cosine: float | None, min_side: int | None = None) -> bool:
        """Whether verifying this pair could change its verdict: a candidate not already near."""
        return self.is_candidate(hamming, cosine) and not self.is_near(hamming, cosine, None, min_side)

    def is_near(
        self, hamming: int | None, cosine: float | None, verify: float | None = None, min_side: int | None = None
    ) -> bool:
        """Whether one pair is a near duplicate (``None`` = evidence missing / not run / unknown)."""
        return bool(self.near_mask(_ham(hamming), _num(cosine), _num(verify), _num(min_side)))

    def classify(
        self, hamming: int | None, cosine: float | None, verify: float | None = None, min_side: int | None = None
    ) -> MatchTier | None:
        """``"near"``, ``"semantic"`` or ``None`` for one pair (exact matches are decided earlier).

        ``min_side`` is the smaller of the two images' short sides in pixels; ``None``
        (unknown) lets cosine decide as for large images.
        """
        args = (_ham(hamming), _num(cosine), _num(verify), _num(min_side))
        if self.near_mask(*args):
            return "near"
        if self.semantic_mask(*args):
            return "semantic"
        return None

    def near_evidence(
        self, hamming: int | None, cosine: float | None, verify: float | None = None, min_side: int | None = None
    ) -> list[str]:
        """Which near criteria one pair meets (``phash``, ``cosine``, ``verify``), for its evidence."""
        reasons = []
        if hamming is not None and hamming <= self.phash_hamming:
            reasons.append("phash")
        if cosine is not None and cosine >= self.near_cosine and bool(self._cosine_counts(_num(min_side))):
            reasons.append("cosine")
        if verify is not None and verify >= self.verify_score and self.is_candidate(hamming, cosine):
            reasons.append("verify")
        return reasons


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ham(value: int | None) -> float:
    return float(_MISSING_HAMMING if value is None else value)


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


# Chosen from the measured curve of `python -m bench.accuracy` (efficientnet-lite0, the
# bundled offline model): see docs/thresholds.md for the table and the operating point.
DEFAULT_THRESHOLDS = Thresholds(
    phash_hamming=8,
    near_cosine=0.80,
    semantic_cosine=0.70,
    cosine_min_side=96,
    candidate_hamming=20,
    candidate_cosine=0.50,
    verify_score=0.70,
)

# Cosine scales differ per embedding model; hash and verification thresholds do not.
MODEL_THRESHOLDS: dict[str, Thresholds] = {
    "efficientnet-lite0:imagenet": DEFAULT_THRESHOLDS,
}


def thresholds_for_model(model_id: str | None) -> Thresholds:
    """The calibrated defaults for an embedding model id, or ``DEFAULT_THRESHOLDS`` (logged)."""
    if model_id is not None and model_id in MODEL_THRESHOLDS:
        return MODEL_THRESHOLDS[model_id]
    if model_id is not None:
        logger.warning(
            "no calibrated cosine thresholds for model %s; using the efficientnet-lite0 ones "
            "(run `python -m bench.accuracy --model SPEC` to calibrate, see docs/thresholds.md)",
            model_id,
        )
    return DEFAULT_THRESHOLDS
