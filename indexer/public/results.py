"""What the Python API returns: an audit's report with its gate verdict, a dedup's clusters and drop list.

Both wrap the library's own report unchanged (``report``): the ``splitaudit.report/v1`` object
built by ``splitaudit.indexer.reporting.report`` (a dict today; the typed model when it lands
works the same) and the dedup report of ``splitaudit.indexer.dedup.outputs``. ``to_pandas()``
flattens them for a notebook (``pip install 'splitaudit[pandas]'``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from splitaudit.indexer.errors import UsageError

if TYPE_CHECKING:
    import pandas

    from splitaudit.indexer.gate.evaluate import GateResult

__all__ = ["MATCH_COLUMNS", "MEMBER_COLUMNS", "AuditResult", "DedupResult", "report_dict"]

# One row per (test item, match) in AuditResult.to_pandas(), in this order.
MATCH_COLUMNS = (
    "key",
    "label",
    "verdict",
    "gate_failed",
    "match_id",
    "kind",
    "corpus",
    "corpus_key",
    "uri",
    "cosine",
    "hamming",
    "review",
    "suppressed_by",
)
# One row per cluster member in DedupResult.to_pandas().
MEMBER_COLUMNS = ("cluster", "semantic", "key", "kept", "tier", "url")


def report_dict(report: Any) -> dict[str, Any]:
    """The report as plain JSON-ready data, whether it is a dict or a pydantic model."""
    if isinstance(report, Mapping):
        return dict(report)
    to_json = getattr(report, "to_json", None)  # the typed Report: its own JSON form
    if callable(to_json):
        data = to_json()
        if isinstance(data, dict):
            return data
    dump = getattr(report, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", by_alias=True)
        if isinstance(dumped, dict):
            return dumped
    raise TypeError(f"not a splitaudit report: {type(report).__name__}")


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise UsageError(
            "to_pandas() needs pandas: pip install 'splitaudit[pandas]' (or pip install pandas)"
        ) from exc
    return pandas


def _review_verdict(review: Any) -> str | None:
    if isinstance(review, Mapping):
        verdict = review.get("verdict")
        return None if verdict is None else str(verdict)
    return None


@dataclass(frozen=True)
class AuditResult:
    """One audit: the report (``report``), the gate's verdict under the policy (``gate``).

    ``result["summary"]`` and the other report keys read the report; ``passed`` and
    ``exit_code`` are what ``splitaudit audit`` would say.
    """

    report: Any
    gate: GateResult
    _data: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self._data:
            from splitaudit.indexer.gate.evaluate import apply_gate

            object.__setattr__(self, "_data", apply_gate(report_dict(self.report), self.gate))

    def to_dict(self) -> dict[str, Any]:
        """The JSON report with its ``gate`` section (what ``splitaudit audit --json`` writes)."""
        return self._data

    def __getitem__(self, key: str) -> Any:
        """A key of the JSON report: ``summary``, ``items``, ``failed``, ``gate``, ..."""
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    @property
    def summary(self) -> dict[str, Any]:
        """Counts of test images: ``items``, ``flagged``, ``by_kind``."""
        summary: dict[str, Any] = self._data["summary"]
        return summary

    @property
    def items(self) -> list[dict[str, Any]]:
        """Every audited test item with its verdict and matches."""
        items: list[dict[str, Any]] = self._data.get("items", [])
        return items

    @property
    def flagged(self) -> list[dict[str, Any]]:
        """The test items the gate counts against the policy."""
        return [item for item in self.items if item.get("gate_failed")]

    @property
    def passed(self) -> bool:
        """True when the gate passed (no more flagged images than the policy allows)."""
        return self.gate.status == "passed"

    @property
    def exit_code(self) -> int:
        """``splitaudit audit``'s exit status for this result: 0 passed, 1 failed, 3 error."""
        return {"passed": 0, "failed": 1}.get(self.gate.status, 3)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per match (``MATCH_COLUMNS``); clean test items have no row."""
        rows = [
            {
                "key": item.get("key"),
                "label": item.get("label"),
                "verdict": item.get("verdict"),
                "gate_failed": bool(item.get("gate_failed")),
                "match_id": match.get("id"),
                "kind": match.get("kind"),
                "corpus": match.get("corpus"),
                "corpus_key": match.get("corpus_key"),
                "uri": match.get("uri"),
                "cosine": match.get("cosine"),
                "hamming": match.get("hamming"),
                "review": _review_verdict(match.get("review")),
                "suppressed_by": match.get("suppressed_by"),
            }
            for item in self.items
            for match in item.get("matches", [])
        ]
        return _pandas().DataFrame(rows, columns=list(MATCH_COLUMNS))

    def __repr__(self) -> str:
        sm = self.summary
        return (
            f"AuditResult({self.gate.status}: {sm.get('flagged')} of {sm.get('items')} test images "
            f"flagged, by kind {sm.get('by_kind')})"
        )


@dataclass(frozen=True)
class DedupResult:
    """One dedup run: its report, the clusters, and the drop list (``(key, url)`` of every non-kept member)."""

    run_id: int
    report: dict[str, Any]
    drop: list[tuple[str, str | None]]

    @property
    def clusters(self) -> list[dict[str, Any]]:
        """Duplicate clusters (exact and near): ``id``, ``members`` (each ``key``, ``kept``, ...)."""
        clusters: list[dict[str, Any]] = self.report.get("clusters", [])
        return clusters

    @property
    def semantic_clusters(self) -> list[dict[str, Any]]:
        """Semantic clusters (reported only, never in the drop list); empty unless asked for."""
        clusters: list[dict[str, Any]] = self.report.get("semantic_clusters", [])
        return clusters

    @property
    def drop_keys(self) -> list[str]:
        """The keys to drop from the corpus, one kept per cluster."""
        return [key for key, _url in self.drop]

    @property
    def summary(self) -> dict[str, Any]:
        """``items``, ``clusters``, ``duplicates``, ``duplicate_rate``, ``by_tier``."""
        summary: dict[str, Any] = self.report["summary"]
        return summary

    def to_pandas(self) -> pandas.DataFrame:
        """One row per cluster member: ``cluster``, ``semantic``, ``key``, ``kept``, ``url``, ..."""
        from splitaudit.indexer.dedup.outputs import member_rows

        rows = member_rows(self.report)
        extra = sorted({k for row in rows for k in row} - set(MEMBER_COLUMNS))
        return _pandas().DataFrame(rows, columns=[*MEMBER_COLUMNS, *extra])

    def __repr__(self) -> str:
        sm = self.summary
        return (
            f"DedupResult({sm.get('items')} items: {sm.get('clusters')} clusters, "
            f"{len(self.drop)} to drop)"
        )
