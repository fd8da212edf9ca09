"""Per-tier match thresholds and the one rule that turns pair scores into near / semantic.

The engine and ``bench/accuracy`` both call ``Thresholds.near_mask`` / ``classify``, so the
audit applies exactly the rule whose precision and recall the benchmark measured. How the
defaults were chosen, with the measured table: ``docs/thresholds.md``.

A pair (test item, corpus item) is **near** when any of:

1. pHash Hamming distance <= ``phash_hamming`` (the smaller of the test image's plain and
   mirrored pHash against the corpus pHash);
2. embedding cosine >= ``near_cosine`` (catches crops, overlays, rotations);
3. it is a verification candidate -- Hamming <= ``candidate_hamming`` or cosine >=
   ``candidate_cosine`` -- and ``indexer.audit.verify`` scores it >= ``verify_score``
   (catches shifted / rescaled / recoloured low-resolution copies both hashes miss).

It is **semantic** when not near and cosine >= ``semantic_cosine``. Missing evidence (no
hash, no embedding, verification not run) never matches: pass ``None`` (scalars) or NaN
(arrays; a Hamming distance > 64 for a missing hash).
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


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Decision thresholds for the near and semantic tiers (see the module docstring).

    Hamming distances are bits of a 64-bit pHash (0-64); cosines and the verification
    score lie in [-1, 1]. Construct directly, or from user input with ``from_mapping``.
    """

    phash_hamming: int
    near_cosine: float
    semantic_cosine: float
    candidate_hamming: int
    candidate_cosine: float
    verify_score: float

    def __post_init__(self) -> None:
        for name in _HAMMING_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 64:
                raise UsageError(f"threshold {name} must be an integer number of bits in 0..64, got {value!r}")
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
        unknown = sorted(set(mapping) - set(names))
        if unknown:
            raise UsageError(f"unknown threshold(s) {', '.join(map(repr, unknown))}; valid keys: {', '.join(names)}")
        return replace(base or DEFAULT_THRESHOLDS, **dict(mapping))

    def to_dict(self) -> dict[str, int | float]:
        """Plain ``{name: value}``, as recorded in reports; ``from_mapping`` reads it back."""
        return asdict(self)

    def candidate_mask(self, hamming: ArrayLike, cosine: ArrayLike) -> npt.NDArray[np.bool_]:
        """Which pairs the engine must verify (vectorised; NaN / > 64 means missing)."""
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return (ham <= self.candidate_hamming) | (cos >= self.candidate_cosine)  # type: ignore[no-any-return]

    def near_mask(self, hamming: ArrayLike, cosine: ArrayLike, verify: ArrayLike) -> npt.NDArray[np.bool_]:
        """The near rule, vectorised over pairs (NaN / > 64 means missing evidence)."""
        ham = np.asarray(hamming, dtype=np.float64)
        cos = np.asarray(cosine, dtype=np.float64)
        ver = np.asarray(verify, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            verified = (ver >= self.verify_score) & self.candidate_mask(ham, cos)
            return (ham <= self.phash_hamming) | (cos >= self.near_cosine) | verified  # type: ignore[no-any-return]

    def semantic_mask(self, hamming: ArrayLike, cosine: ArrayLike, verify: ArrayLike) -> npt.NDArray[np.bool_]:
        """The semantic rule, vectorised: cosine >= ``semantic_cosine`` and not near."""
        cos = np.asarray(cosine, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return (cos >= self.semantic_cosine) & ~self.near_mask(hamming, cos, verify)  # type: ignore[no-any-return]

    def is_candidate(self, hamming: int | None, cosine: float | None) -> bool:
        """Whether one pair should be verified (``None`` = evidence missing)."""
        return bool(self.candidate_mask(_ham(hamming), _num(cosine)))

    def needs_verify(self, hamming: int | None, cosine: float | None) -> bool:
        """Whether the verifier would change this pair's verdict: a candidate not already near."""
        already_near = self.is_near(hamming, cosine, None)
        return not already_near and self.is_candidate(hamming, cosine)

    def is_near(self, hamming: int | None, cosine: float | None, verify: float | None = None) -> bool:
        """Whether one pair is a near duplicate (``None`` = evidence missing / not run)."""
        return bool(self.near_mask(_ham(hamming), _num(cosine), _num(verify)))

    def classify(
        self, hamming: int | None, cosine: float | None, verify: float | None = None
    ) -> MatchTier | None:
        """``"near"``, ``"semantic"`` or ``None`` for one pair (exact matches are decided earlier)."""
        if self.is_near(hamming, cosine, verify):
            return "near"
        if cosine is not None and not math.isnan(cosine) and cosine >= self.semantic_cosine:
            return "semantic"
        return None

    def near_evidence(self, hamming: int | None, cosine: float | None, verify: float | None = None) -> list[str]:
        """Which near criteria a pair meets (``phash``, ``cosine``, ``verify``), for a match's evidence."""
        reasons = []
        if hamming is not None and hamming <= self.phash_hamming:
            reasons.append("phash")
        if cosine is not None and cosine >= self.near_cosine:
            reasons.append("cosine")
        if verify is not None and verify >= self.verify_score and self.is_candidate(hamming, cosine):
            reasons.append("verify")
        return reasons


def _ham(value: int | None) -> float:
    return float(_MISSING_HAMMING if value is None else value)


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


# Chosen from the measured curve of `python -m bench.accuracy` (efficientnet-lite0, the
# bundled offline model): see docs/thresholds.md for the table and the operating point.
DEFAULT_THRESHOLDS = Thresholds(
    phash_hamming=8,
    near_cosine=0.95,
    semantic_cosine=0.80,
    candidate_hamming=22,
    candidate_cosine=0.60,
    verify_score=0.90,
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
