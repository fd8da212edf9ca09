"""The ``splitaudit.report/v1`` report as typed values (pydantic), and the gate's verdict on it.

One ``Report`` is built per audit (``reporting.report.build_report``), rendered by every format
(``reporting.formats``, ``reporting.html_report``), evaluated by the gate (which never writes
into it: its verdict is a separate ``GateView``), served as the REST ``response_model`` and
published as a JSON Schema (``docs/schema/report-v1.json``, written by ``report_json_schema``).

Pydantic here rather than frozen dataclasses (STYLE habit 7) because the report *is* a wire
format: one definition gives validation of reports read back from files and servers, the JSON
output, the OpenAPI schema and the published JSON Schema.

Field names are the JSON keys. A field that the source did not set is left out of the JSON
(``to_json`` dumps with ``exclude_unset``), so a report read from a file is written back with
the same keys, and a match without a corpus item (a self label leak) carries no provenance keys.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from splitaudit.indexer.kinds import MatchKind

SCHEMA: Final = "splitaudit.report/v1"
SCHEMA_ID = "https://splitaudit.dev/schema/report-v1.json"

Verdict = Literal["duplicate", "not_duplicate", "unsure"]
SuppressedBy = Literal["review", "baseline"]
GateStatus = Literal["passed", "failed", "error"]


class _Model(BaseModel):
    """Shared settings: unknown keys from newer writers are kept, names are the JSON keys."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (only the keys that were set, in field order)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class ReviewInfo(_Model):
    """A match's current review (``inherited_from_match`` when carried over from an earlier audit)."""

    verdict: Verdict
    note: str | None = None
    reviewer: str | None = None
    at: str | None = None
    inherited_from_match: int | None = None


class ReportMatch(_Model):
    """One match of a test item, with the corpus item's provenance when there is one."""

    id: int | None = None
    kind: MatchKind
    corpus: str | None = None
    cosine: float | None = None
    hamming: int | None = None
    score: float | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    review: ReviewInfo | None = None
    corpus_item_id: int | None = None
    corpus_key: str | None = None
    uri: str | None = None
    url: str | None = None
    caption: str | None = None
    label: str | None = None
    license: str | None = None
    shard: str | None = None
    sha256: str | None = None
    pixel_digest: str | None = None
    # Written only into a gated JSON file (``--json``): why the gate did not count the match.
    suppressed_by: SuppressedBy | None = None

    @property
    def review_suppressed(self) -> bool:
        """True when the current review verdict is ``not_duplicate`` (the match does not count)."""
        return self.review is not None and self.review.verdict == "not_duplicate"


class ReportItem(_Model):
    """One readable test item: its verdict and its matches, strongest first."""

    split_item_id: int | None = None
    key: str
    label: str | None = None
    sha256: str | None = None
    pixel_digest: str | None = None
    verdict: MatchKind | Literal["clean"] = "clean"
    matches: list[ReportMatch] = Field(default_factory=list)
    match_count: int | None = None
    # Written only into a gated JSON file (``--json``): whether the gate flagged the item.
    gate_failed: bool | None = None


class FailedItem(_Model):
    """A test item that could not be read, so was not audited."""

    key: str
    reason: str | None = None
    split_item_id: int | None = None


class SplitDuplicate(_Model):
    """Two test items of the same split that duplicate each other."""

    a: str | None = None
    b: str | None = None
    kind: str
    cosine: float | None = None
    hamming: int | None = None


class LabelCounts(_Model):
    """Flagged test images of one label."""

    items: int = 0
    flagged: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)
    rate: float = 0.0


class Summary(_Model):
    """Counts of test *images* (not pairs): per kind, rates, per label."""

    items: int | None = None
    readable: int | None = None
    failed: int | None = None
    flagged: int | None = None
    flagged_rate: float | None = None
    contaminated: int | None = None
    contaminated_rate: float | None = None
    by_kind: dict[str, int] = Field(default_factory=dict)
    by_label: dict[str, LabelCounts] = Field(default_factory=dict)
    split_duplicates: int | None = None


class SplitRef(_Model):
    """The audited split."""

    id: int | None = None
    name: str | None = None


class PolicyView(_Model):
    """The gate policy in force, as recorded in the gate section."""

    fail_on: list[str] = Field(default_factory=list)
    max_rate: float | None = None
    max_count: int | None = None
    max_unreadable: int | None = None
    max_unreadable_rate: float | None = None
    thresholds: dict[str, int | float] = Field(default_factory=dict)  # bit counts stay whole
    baseline: str | None = None
    source: str | None = None


class SuppressedView(_Model):
    """A match the gate did not count, and why."""

    key: str
    match_id: int | None = None
    kind: str
    corpus: str | None = None
    corpus_key: str | None = None
    by: SuppressedBy
    note: str | None = None
    # Position of the match in its item's ``matches``: how renderers mark it; not in the JSON.
    index: int | None = Field(default=None, exclude=True)


class GateView(_Model):
    """The gate's verdict on a report: a value of its own, passed to the renderers beside the report."""

    status: GateStatus
    passed: bool
    policy: PolicyView
    items: int
    readable: int
    failed_items: int = 0
    unreadable_keys: list[str] = Field(default_factory=list)
    flagged: int
    rate: float
    counts: dict[str, int] = Field(default_factory=dict)
    flagged_keys: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    suppressed: list[SuppressedView] = Field(default_factory=list)
    stale_baseline: list[dict[str, Any]] = Field(default_factory=list)
    baseline: str | None = None


class Report(_Model):
    """A ``splitaudit.report/v1`` report: what was audited against what, and every match."""

    schema_: Literal["splitaudit.report/v1"] = Field(default=SCHEMA, alias="schema")
    audit_id: int | None = None
    status: str | None = None
    split: SplitRef | None = None
    corpora: list[str] = Field(default_factory=list)
    created_at: str | None = None
    finished_at: str | None = None
    summary: Summary = Field(default_factory=Summary)
    thresholds: dict[str, Any] | None = None
    model: dict[str, Any] | None = None
    index: dict[str, Any] | None = None
    code_version: str | None = None
    params: dict[str, Any] | None = None
    items: list[ReportItem] = Field(default_factory=list)
    failed: list[FailedItem] = Field(default_factory=list)
    split_duplicates: list[SplitDuplicate] = Field(default_factory=list)
    # Written only into a gated JSON file (``--json``): the gate's verdict.
    gate: GateView | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form; ``schema`` is always written."""
        out = super().to_json()
        return {"schema": self.schema_, **out}


def as_report(report: Report | Any) -> Report:
    """``report`` as a ``Report``: itself, or a JSON mapping (a file, a server answer) validated."""
    return report if isinstance(report, Report) else Report.model_validate(report)


def report_json_schema() -> dict[str, Any]:
    """The JSON Schema of a ``splitaudit.report/v1`` report (what ``docs/schema/report-v1.json`` holds)."""
    schema = Report.model_json_schema(by_alias=True, mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }


def report_json_schema_text() -> str:
    """The JSON Schema as the committed file's text."""
    return json.dumps(report_json_schema(), indent=2, ensure_ascii=False) + "\n"
