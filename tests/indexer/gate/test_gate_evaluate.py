"""evaluate(): per-tier counts, rate and count limits, review and baseline suppression, stale entries."""

from __future__ import annotations

from typing import Any

import pytest

from splitaudit.indexer.gate.baseline import Baseline, BaselineEntry
from splitaudit.indexer.gate.evaluate import apply_gate, evaluate
from splitaudit.indexer.gate.policy import Policy


def match(
    kind: str,
    corpus_key: str | None = "c/1.jpg",
    *,
    mid: int = 1,
    verdict: str | None = None,
    corpus: str = "laion",
    sha: str | None = None,
) -> dict[str, Any]:
    """A report match as audit_report() writes it."""
    return {
        "id": mid,
        "kind": kind,
        "corpus": corpus,
        "corpus_key": corpus_key,
        "uri": f"/c/{corpus_key}",
        "cosine": 0.97 if kind != "label_leak" else None,
        "hamming": 2 if kind in ("exact", "near") else None,
        "evidence": {},
        "sha256": sha,
        "review": {"verdict": verdict, "note": "checked", "reviewer": "ann", "at": None}
        if verdict
        else None,
    }


def item(key: str, *matches: dict[str, Any], sha: str | None = None) -> dict[str, Any]:
    kinds = [m["kind"] for m in matches]
    return {
        "key": key,
        "label": "cat",
        "sha256": sha or f"sha-{key}",
        "pixel_digest": f"px-{key}",
        "verdict": kinds[0] if kinds else "clean",
        "matches": list(matches),
    }


def report(*items: dict[str, Any], failed: int = 0, semantic: str = "ok") -> dict[str, Any]:
    fails = [{"key": f"bad{i}.jpg", "reason": "cannot identify image"} for i in range(failed)]
    return {
        "schema": "splitaudit.report/v1",
        "corpora": ["laion"],
        "summary": {"items": len(items) + failed, "readable": len(items), "failed": failed},
        "model": {"semantic": semantic, "reason": "no weights" if semantic != "ok" else None},
        "items": list(items),
        "failed": fails,
    }


def clean(n: int) -> list[dict[str, Any]]:
    return [item(f"clean{i}.jpg") for i in range(n)]


def test_clean_report_passes() -> None:
    result = evaluate(report(*clean(3)), Policy())
    assert result.passed and result.status == "passed"
    assert result.flagged == 0 and result.rate == 0.0
    assert result.counts == {"exact": 0, "near": 0, "semantic": 0, "label_leak": 0, "caption": 0}


def test_counts_images_per_tier_not_pairs() -> None:
    r = report(
        item(
            "a.jpg",
            match("near", mid=1),
            match("near", "c/2.jpg", mid=2),
            match("label_leak", mid=3),
        ),
        item("b.jpg", match("semantic", mid=4)),
        *clean(2),
    )
    result = evaluate(r, Policy())
    assert result.counts == {"exact": 0, "near": 1, "semantic": 1, "label_leak": 1, "caption": 0}
    assert result.flagged_keys == ("a.jpg",)  # semantic is not in the default fail_on
    assert result.flagged == 1 and result.rate == pytest.approx(0.25)
    assert not result.passed
    assert "1 of 4 readable test images flagged (25.00%) exceeds max rate 0" in result.reasons[0]


def test_tiers_outside_fail_on_do_not_fail() -> None:
    r = report(item("a.jpg", match("semantic"), match("label_leak", None)), *clean(1))
    assert evaluate(r, Policy()).passed
    failing = evaluate(r, Policy(fail_on=("label_leak",)))
    assert not failing.passed and failing.flagged_keys == ("a.jpg",)


def test_max_rate_tolerates_up_to_the_limit() -> None:
    r = report(item("a.jpg", match("exact")), *clean(9))
    assert evaluate(r, Policy(max_rate=0.1)).passed  # 10% is not above 10%
    assert not evaluate(r, Policy(max_rate=0.05)).passed


def test_max_count_alone_and_with_rate() -> None:
    r = report(item("a.jpg", match("exact")), item("b.jpg", match("near")), *clean(2))
    assert evaluate(r, Policy(max_count=2)).passed
    one = evaluate(r, Policy(max_count=1))
    assert not one.passed and one.reasons == ("2 flagged test images exceeds max count 1",)
    both = evaluate(r, Policy(max_count=5, max_rate=0.25))
    assert not both.passed and len(both.reasons) == 1 and "max rate" in both.reasons[0]


def test_rate_uses_readable_images_only() -> None:
    r = report(item("a.jpg", match("exact")), *clean(1), failed=2)
    result = evaluate(r, Policy(max_rate=0.6, max_unreadable=2))
    assert (result.items, result.readable, result.failed_items) == (4, 2, 2)
    assert result.rate == 0.5 and result.passed


def test_not_duplicate_review_suppresses_the_match() -> None:
    r = report(item("a.jpg", match("near", verdict="not_duplicate", mid=7)), *clean(1))
    result = evaluate(r, Policy())
    assert result.passed
    assert result.counts["near"] == 0
    assert [(s.key, s.match_id, s.by, s.note) for s in result.suppressed] == [
        ("a.jpg", 7, "review", "checked")
    ]


@pytest.mark.parametrize("verdict", ["duplicate", "unsure"])
def test_other_review_verdicts_still_count(verdict: str) -> None:
    r = report(item("a.jpg", match("near", verdict=verdict)))
    result = evaluate(r, Policy())
    assert not result.passed and result.suppressed == ()


def test_one_suppressed_match_leaves_the_others_counted() -> None:
    r = report(
        item(
            "a.jpg", match("near", verdict="not_duplicate", mid=1), match("exact", "c/9.jpg", mid=2)
        )
    )
    result = evaluate(r, Policy())
    assert not result.passed
    assert result.counts == {"exact": 1, "near": 0, "semantic": 0, "label_leak": 0, "caption": 0}


def entry(**kw: Any) -> BaselineEntry:
    base: dict[str, Any] = {
        "test_sha256": "sha-a.jpg",
        "corpus": "laion",
        "corpus_key": "c/1.jpg",
        "kind": "near",
    }
    return BaselineEntry(**{**base, **kw})


def test_baseline_suppresses_the_same_content_and_corpus_item() -> None:
    r = report(item("renamed/a2.jpg", match("near"), sha="sha-a.jpg"), *clean(1))
    result = evaluate(r, Policy(), Baseline(entries=(entry(),), source="b.json"))
    assert result.passed
    assert [s.by for s in result.suppressed] == ["baseline"]
    assert result.stale == ()


def test_baseline_matches_by_pixel_digest_or_corpus_sha() -> None:
    r = report(item("a.jpg", match("near", corpus_key="moved.jpg", sha="corpus-sha")))
    by_pixels = entry(
        test_sha256=None, test_pixel_digest="px-a.jpg", corpus_key=None, corpus_sha256="corpus-sha"
    )
    assert evaluate(r, Policy(), Baseline(entries=(by_pixels,))).passed


def test_visual_baseline_entry_covers_other_visual_tiers_but_not_label_leak() -> None:
    r = report(item("a.jpg", match("exact", mid=1), match("label_leak", mid=2)))
    result = evaluate(
        r, Policy(fail_on=("exact", "label_leak")), Baseline(entries=(entry(kind="near"),))
    )
    assert [s.kind for s in result.suppressed] == ["exact"]
    assert not result.passed and result.counts["label_leak"] == 1


def test_baseline_for_another_corpus_item_or_content_does_not_suppress() -> None:
    r = report(item("a.jpg", match("near")))
    for other in (entry(corpus_key="c/2.jpg"), entry(test_sha256="other"), entry(corpus="other")):
        result = evaluate(r, Policy(), Baseline(entries=(other,)))
        assert not result.passed
        assert result.stale == (other,)


def test_stale_entries_are_reported_not_dropped() -> None:
    used, stale = entry(), entry(test_sha256="gone", test_key="old.jpg")
    r = report(item("a.jpg", match("near")))
    result = evaluate(r, Policy(), Baseline(entries=(used, stale), source="b.json"))
    assert result.passed
    assert result.stale == (stale,)
    assert result.to_dict()["stale_baseline"][0]["test_key"] == "old.jpg"


def test_entry_used_by_a_reviewed_match_is_not_stale() -> None:
    r = report(item("a.jpg", match("near", verdict="not_duplicate")))
    result = evaluate(r, Policy(), Baseline(entries=(entry(),)))
    assert result.stale == ()
    assert [s.by for s in result.suppressed] == ["review"]


def test_self_label_leak_entry_matches_matches_without_corpus_item() -> None:
    leak = match("label_leak", None, corpus=None)  # type: ignore[arg-type]
    r = report(item("a.jpg", leak))
    e = entry(corpus=None, corpus_key=None, kind="label_leak")
    assert evaluate(r, Policy(fail_on=("label_leak",)), Baseline(entries=(e,))).passed


def test_skipped_semantic_tier_is_an_error_only_when_it_fails_the_gate() -> None:
    r = report(*clean(2), semantic="skipped")
    assert evaluate(r, Policy()).status == "passed"
    result = evaluate(r, Policy(fail_on=("exact", "semantic")))
    assert result.status == "error" and not result.passed
    assert "semantic tier but it was skipped: no weights" in result.errors[0]


def test_apply_gate_annotates_items_and_matches_without_touching_the_input() -> None:
    r = report(
        item(
            "a.jpg", match("near", mid=1), match("exact", "c/2.jpg", mid=2, verdict="not_duplicate")
        ),
        item("b.jpg", match("near", mid=3)),
    )
    result = evaluate(r, Policy(), Baseline(entries=(entry(test_sha256="sha-b.jpg"),)))
    gated = apply_gate(r, result)
    a, b = gated["items"]
    assert a["gate_failed"] is True and b["gate_failed"] is False
    assert [m["suppressed_by"] for m in a["matches"]] == [None, "review"]
    assert [m["suppressed_by"] for m in b["matches"]] == ["baseline"]
    assert gated["gate"]["status"] == "failed"
    assert gated["gate"]["flagged_keys"] == ["a.jpg"]
    assert "gate" not in r and "gate_failed" not in r["items"][0]


def test_label_leak_in_fail_on_without_any_label_is_an_error_not_a_pass() -> None:
    unlabelled = [dict(item(f"{i}.jpg"), label=None) for i in range(2)]
    result = evaluate(report(*unlabelled), Policy(fail_on=("exact", "label_leak")))
    assert result.status == "error" and not result.passed
    assert "label_leak tier but no test item has a label" in result.errors[0]
    assert evaluate(report(*unlabelled), Policy(fail_on=("exact",))).passed
    assert evaluate(report(*clean(2)), Policy(fail_on=("exact", "label_leak"))).passed
