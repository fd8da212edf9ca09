"""The one-paragraph human summary the ``audit`` command prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from splitaudit.indexer.gate.evaluate import GateResult, semantic_status
from splitaudit.indexer.gate.policy import TIERS
from splitaudit.indexer.reporting.models import Report, as_report


def summary_paragraph(
    report: Report | Mapping[str, Any], result: GateResult, *, corpora: Sequence[str] = ()
) -> str:
    """What was audited, what was flagged per tier, the policy and the verdict, in one paragraph."""
    report = as_report(report)
    names = list(corpora) or report.corpora
    against = f" against {', '.join(names)}" if names else ""
    unreadable = (
        f" ({result.failed_items} could not be read and were not audited)"
        if result.failed_items
        else ""
    )
    tiers = ", ".join(
        f"{tier} {result.counts.get(tier, 0)}" + ("*" if tier in result.policy.fail_on else "")
        for tier in TIERS
    )
    sentences = [
        f"Audited {result.items} test images{against}{unreadable}.",
        f"Flagged per tier: {tiers} (* = fails the gate).",
    ]
    suppressed = []
    if result.suppressed_count("review"):
        suppressed.append(f"{result.suppressed_count('review')} by review")
    if result.suppressed_count("baseline"):
        suppressed.append(f"{result.suppressed_count('baseline')} by baseline")
    if suppressed:
        sentences.append(f"Matches not counted: {' and '.join(suppressed)}.")
    if result.stale:
        where = f" in {result.baseline_source}" if result.baseline_source else ""
        sentences.append(
            f"{len(result.stale)} stale baseline entr{'y' if len(result.stale) == 1 else 'ies'}{where} "
            f"matched nothing (e.g. {result.stale[0].describe()}); remove them or re-export the baseline."
        )
    status, reason = semantic_status(report)
    if status != "ok":
        sentences.append(f"Semantic tier {status}: {reason or 'no reason given'}.")
    source = f" from {result.policy.source}" if result.policy.source else ""
    sentences.append(
        f"Policy{source}: {result.policy.describe()}; {result.flagged} of {result.readable} readable "
        f"images ({result.rate:.2%}) count against it."
    )
    if result.errors:
        sentences.append("Gate ERROR: " + "; ".join(result.errors) + ".")
    elif result.passed:
        sentences.append("Gate PASSED.")
    else:
        sentences.append("Gate FAILED: " + "; ".join(result.reasons) + ".")
    return " ".join(sentences)
