"""The tier registry: every kind registered once, and every presentation reads it (no tier written out elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path

from splitaudit.indexer.gate.policy import DEFAULT_FAIL_ON, TIERS
from splitaudit.indexer.kinds import (
    DEFAULT_FAIL_KINDS,
    KIND_RANK,
    MATCH_KINDS,
    PIXEL_KINDS,
    TIER_BY_KIND,
    MatchKind,
    tier_css,
)
from splitaudit.indexer.kinds import (
    TIERS as REGISTRY,
)
from splitaudit.indexer.reporting.formats import _describe
from splitaudit.indexer.reporting.html_report import _CSS
from splitaudit.indexer.reporting.models import ReportMatch

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_is_registered_once_in_rank_order() -> None:
    assert [t.kind for t in REGISTRY] == list(MatchKind)
    assert set(TIER_BY_KIND) == {k.value for k in MatchKind}
    assert list(KIND_RANK) == [k.value for k in MATCH_KINDS] and TIERS == MATCH_KINDS
    assert PIXEL_KINDS == (MatchKind.EXACT, MatchKind.NEAR) == DEFAULT_FAIL_KINDS == DEFAULT_FAIL_ON


def test_formats_css_and_ui_styles_come_from_the_registry() -> None:
    css = tier_css()
    for tier in REGISTRY:
        k = tier.kind.value
        assert (
            f"--{k}:{tier.colour}" in css and f".fill-{k}{{" in css and f".kind-border-{k}{{" in css
        )
        assert f".kind.{k}{{background:{tier.colour}}}" in _CSS  # the HTML report's badge
        match = ReportMatch(kind=tier.kind, corpus="c", corpus_key="k.jpg")
        assert _describe(match).startswith(tier.phrase.format(target="c:k.jpg"))
    # the stylesheet and the renderers name no tier of their own (a new tier touches none of them)
    app_css = (ROOT / "app" / "static" / "app.css").read_text()
    assert not re.search(r"\.(kind|fill|kind-border)-(exact|near|semantic|label_leak)\b", app_css)
    html = (ROOT / "indexer/reporting/html_report.py").read_text()
    assert not re.search(r"[\"'.](exact|near|semantic|label_leak)[\"'{]", html)
