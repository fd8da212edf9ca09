"""The CI gate: policy, baselines, evaluation of a report, and the server client."""

from __future__ import annotations

from splitaudit.indexer.gate.baseline import (
    Baseline,
    BaselineEntry,
    baseline_from_report,
    load_baseline,
    write_baseline,
)
from splitaudit.indexer.gate.evaluate import GateResult, SuppressedMatch, apply_gate, evaluate
from splitaudit.indexer.gate.policy import Policy, load_policy, load_policy_file

__all__ = [
    "Baseline",
    "BaselineEntry",
    "GateResult",
    "Policy",
    "SuppressedMatch",
    "apply_gate",
    "baseline_from_report",
    "evaluate",
    "load_baseline",
    "load_policy",
    "load_policy_file",
    "write_baseline",
]
