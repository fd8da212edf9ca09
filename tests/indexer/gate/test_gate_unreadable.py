"""Unreadable test images were not audited: by default any of them fails the gate, naming them."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gate_evaluate import clean, report

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.gate.evaluate import apply_gate, evaluate
from splitaudit.indexer.gate.policy import Policy, load_policy_file
from splitaudit.indexer.gate.summary import summary_paragraph
from splitaudit.indexer.reporting.formats import render_junit, render_markdown


def test_all_unreadable_split_fails_by_default_and_names_them() -> None:
    result = evaluate(report(failed=2), Policy())
    assert not result.passed and result.status == "failed"
    assert result.unreadable_keys == ("bad0.jpg", "bad1.jpg")
    reason = result.reasons[0]
    assert "2 of 2 test images could not be read, so were not audited" in reason
    assert "bad0.jpg (cannot identify image)" in reason and "--max-unreadable" in reason
    assert "were not audited" in summary_paragraph(report(failed=2), result)


def test_one_unreadable_among_clean_images_fails_by_default() -> None:
    result = evaluate(report(*clean(9), failed=1), Policy())
    assert not result.passed
    assert result.to_dict()["unreadable_keys"] == ["bad0.jpg"]
    assert result.policy.to_dict()["max_unreadable"] == 0


@pytest.mark.parametrize(
    ("policy", "passed"),
    [
        (Policy(max_unreadable=1), True),
        (Policy(max_unreadable=0), False),
        (Policy(max_unreadable_rate=0.1), True),  # 1 of 10
        (Policy(max_unreadable_rate=0.05), False),
        (Policy(max_unreadable=5, max_unreadable_rate=0.05), False),
    ],
)
def test_limits_relax_the_default(policy: Policy, passed: bool) -> None:
    assert evaluate(report(*clean(9), failed=1), policy).passed is passed


def test_many_unreadable_are_counted_and_the_reason_stays_short() -> None:
    result = evaluate(report(failed=40), Policy())
    assert "and 30 more" in result.reasons[0]
    assert len(result.unreadable_keys) == 40


def test_policy_file_keys(tmp_path: Path) -> None:
    path = tmp_path / "splitaudit.toml"
    path.write_text("max_unreadable = 3\nmax_unreadable_rate = 0.5\n")
    policy = load_policy_file(path)
    assert (policy.max_unreadable, policy.max_unreadable_rate) == (3, 0.5)
    path.write_text("max_unreadable = -1\n")
    with pytest.raises(UsageError, match="max unreadable must be a whole number"):
        load_policy_file(path)


def test_reports_list_unreadable_images_and_the_failing_gate() -> None:
    r = report(*clean(1), failed=1)
    gated = apply_gate(r, evaluate(r, Policy()))
    markdown = render_markdown(gated)
    assert "**Gate FAILED**" in markdown and "bad0.jpg" in markdown
    assert "Unreadable test images (not audited)" in markdown
    junit = render_junit(gated)
    assert 'type="unreadable"' in junit and "bad0.jpg" in junit
    assert gated["gate"]["unreadable_keys"] == ["bad0.jpg"]
