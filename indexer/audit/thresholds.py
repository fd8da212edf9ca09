"""Per-tier thresholds and the rule that turns a pair's scores into a tier.

NOTE for the calibration owner: the audit engine relies on ``Thresholds`` having the fields
``phash_hamming``, ``near_cosine``, ``semantic_cosine``, ``candidate_hamming``,
``candidate_cosine``, ``verify_score`` and the methods ``from_mapping``, ``to_dict``,
``classify(hamming, cosine, verify)`` and ``needs_verify(hamming, cosine)``. Values here are
provisional until ``bench/accuracy`` measures them (see docs/thresholds.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from indexer.errors import UsageError


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Cut-offs per tier; a pair is ``near`` if any near rule fires, else ``semantic`` if cosine is high."""

    phash_hamming: int = 8
    near_cosine: float = 0.95
    semantic_cosine: float = 0.85
    candidate_hamming: int = 20
    candidate_cosine: float = 0.75
    verify_score: float = 0.8

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> Thresholds:
        """Defaults overridden by ``values``; unknown keys or out-of-range values -> ``UsageError``."""
        values = dict(values or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise UsageError(f"unknown threshold(s) {', '.join(unknown)}; known: {', '.join(known)}")
        out = DEFAULT_THRESHOLDS
        for name, raw in values.items():
            try:
                value: Any = int(raw) if name.endswith("hamming") else float(raw)
            except (TypeError, ValueError) as exc:
                raise UsageError(f"threshold {name} must be a number, got {raw!r}") from exc
            if name.endswith("hamming") and not 0 <= value <= 64:
                raise UsageError(f"threshold {name} must be between 0 and 64, got {value}")
            if not name.endswith("hamming") and not -1.0 <= value <= 1.0:
                raise UsageError(f"threshold {name} must be between -1 and 1, got {value}")
            out = replace(out, **{name: value})
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form, recorded in every report."""
        return asdict(self)

    def needs_verify(self, hamming: int | None, cosine: float | None) -> bool:
        """A candidate pair that hashes/cosine alone do not call near, worth a pixel check."""
        if self._near_without_verify(hamming, cosine):
            return False
        return (hamming is not None and hamming <= self.candidate_hamming) or (
            cosine is not None and cosine >= self.candidate_cosine
        )

    def _near_without_verify(self, hamming: int | None, cosine: float | None) -> bool:
        return (hamming is not None and hamming <= self.phash_hamming) or (
            cosine is not None and cosine >= self.near_cosine
        )

    def classify(self, hamming: int | None, cosine: float | None, verify: float | None) -> str | None:
        """``near``, ``semantic`` or None for a pair that is not exact."""
        if self._near_without_verify(hamming, cosine):
            return "near"
        if verify is not None and verify >= self.verify_score and self.needs_verify(hamming, cosine):
            return "near"
        if cosine is not None and cosine >= self.semantic_cosine:
            return "semantic"
        return None


DEFAULT_THRESHOLDS = Thresholds()
