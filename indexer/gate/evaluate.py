"""Evaluate an audit report against a gate policy: counts after suppression, verdict, reasons."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from splitaudit.indexer.gate.baseline import Baseline, BaselineEntry
from splitaudit.indexer.gate.policy import TIERS, Policy
from splitaudit.indexer.reporting.report import semantic_status

SuppressedBy = Literal["review", "baseline"]
UNREADABLE_NAMED = 10  # unreadable images named in the gate's reason (all are in the report)


@dataclass(frozen=True)
class SuppressedMatch:
    """A match that does not count: reviewed ``not_duplicate``, or covered by a baseline entry."""

    key: str
    match_id: int | None
    kind: str
    corpus: str | None
    corpus_key: str | None
    by: SuppressedBy
    note: str | None = None
    index: int = 0  # position of the match in its item's ``matches`` list

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "key": self.key,
            "match_id": self.match_id,
            "kind": self.kind,
            "corpus": self.corpus,
            "corpus_key": self.corpus_key,
            "by": self.by,
            "note": self.note,
        }


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict on one report.

    ``counts`` are test images per tier with at least one counted (unsuppressed) match;
    ``flagged`` counts images with a counted match in a ``fail_on`` tier and ``rate`` is
    ``flagged / readable`` (unreadable images cannot be flagged); ``errors`` are conditions
    under which no verdict can be trusted (e.g. a failing tier was skipped).
    ``unreadable_keys`` name the test images that could not be read, so were not audited;
    more of them than the policy allows fail the gate.
    """

    passed: bool
    policy: Policy
    items: int
    readable: int
    flagged: int
    rate: float
    counts: Mapping[str, int]
    flagged_keys: tuple[str, ...]
    failed_items: int = 0
    reasons: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    suppressed: tuple[SuppressedMatch, ...] = ()
    stale: tuple[BaselineEntry, ...] = ()
    baseline_source: str | None = None
    unreadable_keys: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        """``passed``, ``failed`` or ``error``."""
        if self.errors:
            return "error"
        return "passed" if self.passed else "failed"

    def suppressed_count(self, by: SuppressedBy) -> int:
        """How many matches were suppressed by review or by baseline."""
        return sum(1 for s in self.suppressed if s.by == by)

    def to_dict(self) -> dict[str, Any]:
        """The ``gate`` section added to the JSON report."""
        return {
            "status": self.status,
            "passed": self.passed,
            "policy": self.policy.to_dict(),
            "items": self.items,
            "readable": self.readable,
            "failed_items": self.failed_items,
            "unreadable_keys": list(self.unreadable_keys),
            "flagged": self.flagged,
            "rate": self.rate,
            "counts": dict(self.counts),
            "flagged_keys": list(self.flagged_keys),
            "reasons": list(self.reasons),
            "errors": list(self.errors),
            "suppressed": [s.to_dict() for s in self.suppressed],
            "stale_baseline": [e.to_dict() for e in self.stale],
            "baseline": self.baseline_source,
        }


def is_review_suppressed(match: Mapping[str, Any]) -> bool:
    """True when the match's current review verdict is ``not_duplicate``."""
    review = match.get("review")
    return isinstance(review, Mapping) and review.get("verdict") == "not_duplicate"


def evaluate(
    report: Mapping[str, Any], policy: Policy, baseline: Baseline | None = None
) -> GateResult:
    """Count flagged test images under ``policy``, with reviewed and baselined matches suppressed."""
    baseline = baseline or Baseline()
    used: set[BaselineEntry] = set()
    suppressed: list[SuppressedMatch] = []
    counts = dict.fromkeys(TIERS, 0)
    flagged_keys: list[str] = []
    fail_on = set(policy.fail_on)
    items = list(report.get("items", []))

    for item in items:
        key = str(item.get("key"))
        kinds: set[str] = set()
        for index, match in enumerate(item.get("matches", [])):
            entry = baseline.find(item, match)
            if entry is not None:
                used.add(entry)
            by: SuppressedBy | None = None
            if is_review_suppressed(match):
                by = "review"
            elif entry is not None:
                by = "baseline"
            if by is None:
                kinds.add(str(match.get("kind")))
                continue
            note = (
                (match.get("review") or {}).get("note")
                if by == "review"
                else (entry.note if entry else None)
            )
            suppressed.append(
                SuppressedMatch(
                    key=key,
                    match_id=match.get("id"),
                    kind=str(match.get("kind")),
                    corpus=match.get("corpus"),
                    corpus_key=match.get("corpus_key"),
                    by=by,
                    note=note,
                    index=index,
                )
            )
        for kind in kinds:
            if kind in counts:
                counts[kind] += 1
        if kinds & fail_on:
            flagged_keys.append(key)

    summary = report.get("summary") or {}
    failed = report.get("failed") or []
    total = int(summary.get("items", len(items) + len(failed)))
    readable = int(summary.get("readable", total - len(failed)))
    flagged = len(flagged_keys)
    rate = flagged / readable if readable > 0 else 0.0
    reasons = _reasons(policy, flagged, rate, readable)
    unreadable = [f for f in failed if isinstance(f, Mapping)]
    reasons += _unreadable_reasons(policy, unreadable, total)
    errors = _errors(report, policy)
    return GateResult(
        passed=not reasons and not errors,
        policy=policy,
        items=total,
        readable=readable,
        flagged=flagged,
        rate=rate,
        counts=counts,
        flagged_keys=tuple(flagged_keys),
        failed_items=len(failed),
        reasons=tuple(reasons),
        errors=tuple(errors),
        suppressed=tuple(suppressed),
        stale=tuple(e for e in baseline.entries if e not in used),
        baseline_source=baseline.source,
        unreadable_keys=tuple(str(f.get("key")) for f in unreadable),
    )


def _reasons(policy: Policy, flagged: int, rate: float, readable: int) -> list[str]:
    """Why the gate fails (empty when it passes)."""
    reasons = []
    max_rate = policy.effective_max_rate
    if max_rate is not None and rate > max_rate:
        reasons.append(
            f"{flagged} of {readable} readable test images flagged ({rate:.2%}) "
            f"exceeds max rate {max_rate:.4g}"
        )
    if policy.max_count is not None and flagged > policy.max_count:
        reasons.append(f"{flagged} flagged test images exceeds max count {policy.max_count}")
    return reasons


def _unreadable_reasons(
    policy: Policy, unreadable: list[Mapping[str, Any]], total: int
) -> list[str]:
    """Why the unreadable (never audited) test images fail the gate (empty when within the policy)."""
    count = len(unreadable)
    if count == 0:
        return []
    rate = count / total if total > 0 else 1.0
    limit = policy.effective_max_unreadable
    over = []
    if limit is not None and count > limit:
        over.append(f"max unreadable {limit}")
    if policy.max_unreadable_rate is not None and rate > policy.max_unreadable_rate:
        over.append(f"max unreadable rate {policy.max_unreadable_rate:.4g}")
    if not over:
        return []
    named = "; ".join(
        f"{f.get('key')} ({f.get('reason') or 'no reason given'})"
        for f in unreadable[:UNREADABLE_NAMED]
    )
    more = f"; and {count - UNREADABLE_NAMED} more" if count > UNREADABLE_NAMED else ""
    return [
        f"{count} of {total} test images could not be read, so were not audited ({rate:.2%}), exceeding "
        f"{' and '.join(over)}: {named}{more}. Fix or remove them, or allow some with --max-unreadable N "
        "(max_unreadable in the policy file)"
    ]


def _errors(report: Mapping[str, Any], policy: Policy) -> list[str]:
    """Conditions that make the verdict untrustworthy: a failing tier that was not computed."""
    status, reason = semantic_status(report)
    if "semantic" in policy.fail_on and status in ("skipped", "partial"):
        return [
            f"the policy fails on the semantic tier but it was {status}: {reason or 'no reason given'}"
        ]
    return []


def apply_gate(report: Mapping[str, Any], result: GateResult) -> dict[str, Any]:
    """A copy of ``report`` with a ``gate`` section, ``gate_failed`` per item, ``suppressed_by`` per match."""
    out = copy.deepcopy(dict(report))
    flagged = set(result.flagged_keys)
    by_position = {(s.key, s.index): s.by for s in result.suppressed}
    for item in out.get("items", []):
        key = str(item.get("key"))
        item["gate_failed"] = key in flagged
        for index, match in enumerate(item.get("matches", [])):
            match["suppressed_by"] = by_position.get((key, index))
    out["gate"] = result.to_dict()
    return out
