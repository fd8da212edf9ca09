"""What the matching tiers hand to the audit service: typed values, stored as ``match`` / ``split_duplicate`` rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FoundMatch:
    """One match of a split item: against a corpus item (visual tiers, match-leaks) or none (self-leaks)."""

    split_item_id: int
    item_id: int | None
    corpus: str | None
    kind: str
    cosine: float | None
    hamming: int | None
    score: float | None
    evidence: dict[str, Any]

    def row(self, audit_id: int) -> dict[str, Any]:
        """The ``match`` table row of this match in audit ``audit_id`` (for a bulk insert)."""
        return {
            "audit_id": audit_id,
            "split_item_id": self.split_item_id,
            "item_id": self.item_id,
            "corpus": self.corpus,
            "kind": self.kind,
            "cosine": self.cosine,
            "hamming": self.hamming,
            "score": self.score,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class DuplicatePair:
    """Two rows of a split (``a`` < ``b``, positions in ``SplitState``) that duplicate each other."""

    a: int
    b: int
    kind: str
    cosine: float | None
    hamming: int | None
