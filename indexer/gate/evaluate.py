"""Evaluate an audit report against a gate policy: counts after suppression, verdict, reasons."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from splitaudit.indexer.gate.baseline import Baseline, BaselineEntry
from splitaudit.indexer.gate.policy import TIERS, Policy
from splitaudit.indexer.reporting.formats import is_review_suppressed, report_document
from splitaudit.indexer.reporting.models import (
    FailedItem,
    GateView,
    PolicyView,
    Report,
    SuppressedView,
    as_report,
)
from splitaudit.indexer.reporting.report import semantic_status

__all__ = [
    "GateResult",
    "SuppressedMatch",
    "apply_gate",
    "evaluate",
    "is_review_suppressed",
    "semantic_status",
]

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

    def view(self) -> SuppressedView:
        """The typed form renderers read (``index`` included, left out of the JSON)."""
        return SuppressedView(
            key=self.key,
            match_id=self.match_id,
            kind=self.kind,
            corpus=self.corpus,
            corpus_key=self.corpus_key,
            by=self.by,
            note=self.note,
            index=self.index,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return self.view().to_json()


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

    def view(self) -> GateView:
        """The verdict as the typed value renderers take beside the report (``gate=``)."""
        return GateView(
            status=self.status,  # type: ignore[arg-type]  # one of passed/failed/error
            passed=self.passed,
            policy=PolicyView.model_validate(self.policy.to_dict()),
            items=self.items,
            readable=self.readable,
            failed_items=self.failed_items,
            unreadable_keys=list(self.unreadable_keys),
            flagged=self.flagged,
            rate=self.rate,
            counts=dict(self.counts),
            flagged_keys=list(self.flagged_keys),
            reasons=list(self.reasons),
            errors=list(self.errors),
            suppressed=[s.view() for s in self.suppressed],
            stale_baseline=[e.to_dict() for e in self.stale],
            baseline=self.baseline_source,
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``gate`` section of a gated JSON report."""
        return self.view().to_json()


def evaluate(
    report: Report | Mapping[str, Any], policy: Policy, baseline: Baseline | None = None
) -> GateResult:
    """Count flagged test images under ``policy``, with reviewed and baselined matches suppressed.

    ``report`` is read, never changed; the verdict is the returned value.
    """
    report = as_report(report)
    baseline = baseline or Baseline()
    used: set[BaselineEntry] = set()
    suppressed: list[SuppressedMatch] = []
    counts = dict.fromkeys(TIERS, 0)
    flagged_keys: list[str] = []
    fail_on = set(policy.fail_on)
    items = report.items

    for item in items:
        key = item.key
        kinds: set[str] = set()
        for index, match in enumerate(item.matches):
            entry = baseline.find(item, match)
            if entry is not None:
                used.add(entry)
            by: SuppressedBy | None = None
            if match.review_suppressed:
                by = "review"
            elif entry is not None:
                by = "baseline"
            if by is None:
                kinds.add(str(match.kind))
                continue
            note = (
                (match.review.note if match.review else None)
                if by == "review"
                else (entry.note if entry else None)
            )
            suppressed.append(
                SuppressedMatch(
                    key=key,
                    match_id=match.id,
                    kind=str(match.kind),
                    corpus=match.corpus,
                    corpus_key=match.corpus_key,
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

    summary = report.summary
    failed = report.failed
    total = summary.items if summary.items is not None else len(items) + len(failed)
    readable = summary.readable if summary.readable is not None else total - len(failed)
    flagged = len(flagged_keys)
    rate = flagged / readable if readable > 0 else 0.0
    reasons = _reasons(policy, flagged, rate, readable)
    unreadable = list(failed)
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
        unreadable_keys=tuple(f.key for f in unreadable),
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


def _unreadable_reasons(policy: Policy, unreadable: list[FailedItem], total: int) -> list[str]:
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
        f"{f.key} ({f.reason or 'no reason given'})" for f in unreadable[:UNREADABLE_NAMED]
    )
    more = f"; and {count - UNREADABLE_NAMED} more" if count > UNREADABLE_NAMED else ""
    return [
        f"{count} of {total} test images could not be read, so were not audited ({rate:.2%}), exceeding "
        f"{' and '.join(over)}: {named}{more}. Fix or remove them, or allow some with --max-unreadable N "
        "(max_unreadable in the policy file)"
    ]


def _errors(report: Report, policy: Policy) -> list[str]:
    """Conditions that make the verdict untrustworthy: a failing tier that was not computed."""
    errors = []
    status, reason = semantic_status(report)
    if "semantic" in policy.fail_on and status in ("skipped", "partial"):
        errors.append(
            f"the policy fails on the semantic tier but it was {status}: {reason or 'no reason given'}"
        )
    if "label_leak" in policy.fail_on and report.items and not any(i.label for i in report.items):
        errors.append(
            "the policy fails on the label_leak tier but no test item has a label, so the tier "
            "could not run: give the labels (--labels FILE, an ImageFolder split, a label column) "
            "or drop label_leak from --fail-on"
        )
    return errors


def apply_gate(report: Report | Mapping[str, Any], result: GateResult) -> dict[str, Any]:
    """The gated JSON document (what ``--json`` writes): the report's JSON with the gate's
    ``gate`` section, ``gate_failed`` per item and ``suppressed_by`` per match. ``report`` is not
    changed; renderers take ``result.view()`` as ``gate=`` instead of reading these keys back."""
    return report_document(report, result.view())
