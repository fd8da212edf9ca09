"""Render a ``splitaudit.report/v1`` report as JSON, CSV, JUnit XML or Markdown.

Every renderer takes the typed ``Report`` (or its JSON dict) and, separately, the gate's verdict
(``GateView``, from ``splitaudit.indexer.gate.evaluate(...).view()``): with one, an item fails
when the gate flagged it and suppressed matches are marked as such; without one (the server's
plain report endpoint), an item fails when it has any match not reviewed ``not_duplicate``.
A gated JSON file read back (``gate``, ``gate_failed``, ``suppressed_by`` in it) renders the same.

CSV has one row per match; a clean item gets one row with an empty ``kind`` and an
unreadable item one row with ``verdict`` = ``failed`` and the reason in ``error``, so the
file lists every test image and filters cleanly in a spreadsheet.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from splitaudit.indexer.csv_cells import csv_text
from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.kinds import MATCH_KINDS, TIER_BY_KIND, MatchKind
from splitaudit.indexer.reporting.models import (
    GateView,
    Report,
    ReportItem,
    ReportMatch,
    as_report,
)
from splitaudit.indexer.reporting.report import semantic_status

TIERS = MATCH_KINDS
FORMATS = ("json", "csv", "junit", "md")
_ALIASES = {"markdown": "md", "xml": "junit"}
CSV_COLUMNS = (
    "key",
    "label",
    "verdict",
    "gate_failed",
    "kind",
    "corpus",
    "corpus_key",
    "uri",
    "cosine",
    "hamming",
    "match_id",
    "review",
    "suppressed_by",
    "evidence",
    "sha256",
    "error",
)
MARKDOWN_TOP = 25
# Characters XML 1.0 cannot carry at all (keys come from user file names).
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


ReportInput = Report | Mapping[str, Any]


def render(report: ReportInput, fmt: str, *, gate: GateView | None = None) -> str:
    """The report in format ``fmt`` (json, csv, junit or md); ``UsageError`` for anything else."""
    name = _ALIASES.get(fmt.lower(), fmt.lower())
    renderers: dict[str, Callable[..., str]] = {
        "json": render_json,
        "csv": render_csv,
        "junit": render_junit,
        "md": render_markdown,
    }
    if name not in renderers:
        raise UsageError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderers[name](report, gate=gate)


def report_document(report: ReportInput, gate: GateView | None = None) -> dict[str, Any]:
    """The JSON document of a report; with ``gate``, its ``gate`` section, ``gate_failed`` per item
    and ``suppressed_by`` per match (what ``--json`` writes). ``report`` is not changed."""
    view = Gated(as_report(report), gate)
    doc = view.report.to_json()
    if view.gate is None or gate is None:
        return doc
    for item, out in zip(view.report.items, doc["items"], strict=True):
        out["gate_failed"] = view.item_failed(item)
        for index, match in enumerate(out["matches"]):
            match["suppressed_by"] = view.suppressed_by(item, index)
    doc["gate"] = gate.to_json()
    return doc


def render_json(report: ReportInput, *, gate: GateView | None = None) -> str:
    """The report as indented JSON (UTF-8 text, keys in their given order)."""
    return (
        json.dumps(report_document(report, gate), indent=2, ensure_ascii=False, default=str) + "\n"
    )


# ---------------------------------------------------------------- shared reading helpers


class Gated:
    """A report read with the gate's verdict (or without one): what counts, what fails."""

    def __init__(self, report: Report, gate: GateView | None = None) -> None:
        """``gate`` given: its flags and suppressions; else those a gated file carries, if any."""
        self.report = report
        self.gate = gate or report.gate
        self._given = gate is not None
        self._flagged = set(gate.flagged_keys) if gate else set()
        self._by_position = {
            (s.key, s.index): s.by for s in (gate.suppressed if gate else []) if s.index is not None
        }

    def suppressed_by(self, item: ReportItem, index: int) -> str | None:
        """``review``/``baseline`` when match ``index`` of ``item`` does not count, else None."""
        match = item.matches[index]
        if self._given:
            return self._by_position.get((item.key, index))
        if "suppressed_by" in match.model_fields_set:
            return match.suppressed_by
        return "review" if match.review_suppressed else None

    def counted(self, item: ReportItem) -> list[ReportMatch]:
        """The item's matches that count (not suppressed)."""
        return [m for i, m in enumerate(item.matches) if self.suppressed_by(item, i) is None]

    def suppressed(self, item: ReportItem) -> list[tuple[str, ReportMatch]]:
        """``(by, match)`` of the item's matches that do not count."""
        return [
            (by, m)
            for i, m in enumerate(item.matches)
            if (by := self.suppressed_by(item, i)) is not None
        ]

    def item_failed(self, item: ReportItem) -> bool:
        """Whether the item fails: per the gate when there is one, else any counted match."""
        if self._given:
            return item.key in self._flagged
        if self.gate is not None:
            return bool(item.gate_failed)
        return bool(self.counted(item))

    @property
    def fail_on(self) -> tuple[str, ...]:
        """Tiers that fail an item: the gate policy's, else every tier."""
        return tuple(self.gate.policy.fail_on) if self.gate is not None else tuple(TIERS)

    def tier_counts(self) -> dict[str, int]:
        """Flagged images per tier: the gate's counts (after suppression), else the summary's."""
        counts = self.gate.counts if self.gate is not None else self.report.summary.by_kind
        return {t: int(counts.get(t, 0)) for t in TIERS}

    def readable(self) -> int:
        """Readable test images: the gate's figure, else the summary's, else the items."""
        if self.gate is not None:
            return self.gate.readable
        summary = self.report.summary
        return summary.readable if summary.readable is not None else len(self.report.items)


def is_review_suppressed(match: ReportMatch | Mapping[str, Any]) -> bool:
    """True when the match's current review verdict is ``not_duplicate``."""
    if isinstance(match, ReportMatch):
        return match.review_suppressed
    review = match.get("review")
    return isinstance(review, Mapping) and review.get("verdict") == "not_duplicate"


def _target(match: ReportMatch) -> str:
    """``corpus:key`` of the matched corpus item, or ``own metadata`` for a self label leak."""
    if match.corpus_key is None and match.kind == MatchKind.LABEL_LEAK:
        return "own metadata"
    return f"{match.corpus or '?'}:{match.corpus_key or match.uri or '?'}"


def evidence_text(evidence: Any) -> str:
    """A short human rendering of a match's evidence."""
    if not evidence:
        return ""
    if (
        isinstance(evidence, Mapping)
        and isinstance(evidence.get("hits"), list)
        and evidence["hits"]
    ):
        first = evidence["hits"][0]
        more = int(evidence.get("hit_count") or len(evidence["hits"])) - 1
        text = evidence_text(first) if isinstance(first, Mapping) else str(first)
        return text + (f" (+{more} more)" if more > 0 else "")
    if isinstance(evidence, Mapping):
        term, where = evidence.get("term"), evidence.get("field")
        if term and where:
            snippet = evidence.get("context") or evidence.get("match") or ""
            return f"'{term!s}' in {where!s}" + (f": {snippet!s}" if snippet else "")
    text = json.dumps(evidence, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def _score(match: ReportMatch) -> str:
    """``hamming 3, cosine 0.973`` (whatever the match has)."""
    parts = []
    if match.hamming is not None:
        parts.append(f"hamming {match.hamming}")
    if match.cosine is not None:
        parts.append(f"cosine {float(match.cosine):.3f}")
    if not parts and match.kind == MatchKind.LABEL_LEAK:
        return evidence_text(match.evidence)
    if match.kind == MatchKind.CAPTION and isinstance(match.evidence, dict):
        jaccard = match.evidence.get("jaccard")
        span = match.evidence.get("shared_span")
        if jaccard is not None:
            parts.append(f"jaccard {float(jaccard):.2f}")
        if span:
            parts.append(f'shared "{span}"')
    region = _region_text(match.evidence)
    if region:
        parts.append(region)
    return ", ".join(parts)


def _region_text(evidence: Any) -> str:
    """Where a geometric match located the test image in the corpus image, or ``""``."""
    geometry = evidence.get("geometry") if isinstance(evidence, Mapping) else None
    if not isinstance(geometry, Mapping):
        return ""
    box = geometry.get("box")
    if not isinstance(box, list) or len(box) != 4:
        return ""
    mirrored = ", mirrored" if geometry.get("mirrored") else ""
    test_box = geometry.get("test_box")
    if geometry.get("inset") and isinstance(test_box, list) and len(test_box) == 4:
        x0, y0, x1, y1 = (round(100 * float(v)) for v in test_box)
        where = f"corpus image inset at x {x0}-{x1}% y {y0}-{y1}% of the test image"
    else:
        x0, y0, x1, y1 = (round(100 * float(v)) for v in box)
        where = f"region x {x0}-{x1}% y {y0}-{y1}% of the corpus image"
    text = (
        f"{where} (scale {geometry.get('scale')}, rotated {geometry.get('angle')}°{mirrored}, "
        f"{geometry.get('inliers')} inliers"
    )
    content = geometry.get("content")
    if isinstance(content, Mapping) and content.get("agreement") is not None:
        text += f"; content agrees in {round(100 * float(content['agreement']))}% of {content.get('cells')} cells"
    discarded = geometry.get("discarded")
    if isinstance(discarded, Mapping):
        text += (
            f"; {discarded.get('inliers')} keypoint matches discarded as {discarded.get('reason')}"
        )
    return text + ")"


def _describe(match: ReportMatch) -> str:
    """One line: ``near duplicate of laion:000123 (hamming 3)``."""
    what = TIER_BY_KIND[match.kind].phrase.format(target=_target(match))
    score = _score(match)
    return f"{what} ({score})" if score else what


# ---------------------------------------------------------------- CSV


def _csv_rows(view: Gated) -> Iterator[dict[str, Any]]:
    """One dict per CSV row."""
    gated = view.gate is not None
    seen: set[str] = set()
    for item in view.report.items:
        seen.add(item.key)
        base = {
            "key": item.key,
            "label": item.label,
            "verdict": item.verdict,
            "gate_failed": ("true" if view.item_failed(item) else "false") if gated else "",
            "sha256": item.sha256,
        }
        if not item.matches:
            yield base
        for index, m in enumerate(item.matches):
            yield {
                **base,
                "kind": m.kind,
                "corpus": m.corpus,
                "corpus_key": m.corpus_key,
                "uri": m.uri,
                "cosine": m.cosine,
                "hamming": m.hamming,
                "match_id": m.id,
                "review": m.review.verdict if m.review else None,
                "suppressed_by": view.suppressed_by(item, index),
                "evidence": json.dumps(m.evidence, ensure_ascii=False, sort_keys=True, default=str)
                if m.evidence
                else "",
            }
    for failed in view.report.failed:
        if failed.key not in seen:
            yield {
                "key": failed.key,
                "verdict": "failed",
                "error": failed.reason,
                "gate_failed": "false" if gated else "",
            }


def render_csv(report: ReportInput, *, gate: GateView | None = None) -> str:
    """One row per match (plus one per clean or unreadable item); columns ``CSV_COLUMNS``."""
    return csv_text(_csv_rows(Gated(as_report(report), gate)), CSV_COLUMNS)


# ---------------------------------------------------------------- JUnit XML


def _xml(text: Any) -> str:
    """Text XML 1.0 can carry."""
    return _XML_ILLEGAL.sub("\ufffd", "" if text is None else str(text))


def _match_lines(matches: list[ReportMatch]) -> str:
    """Details of matches, one per line, for failure bodies and system-out."""
    lines = []
    for m in matches:
        line = f"{m.kind}: {_target(m)}"
        for label, value in (("score", _score(m)), ("uri", m.uri), ("match id", m.id)):
            if value not in (None, ""):
                line += f" | {label}: {value}"
        if m.kind != MatchKind.LABEL_LEAK and m.evidence:
            line += f" | evidence: {evidence_text(m.evidence)}"
        lines.append(line)
    return "\n".join(lines)


def render_junit(report: ReportInput, *, gate: GateView | None = None) -> str:
    """JUnit XML: one testcase per test image; flagged -> ``<failure>``, unreadable -> ``<error>``."""
    view = Gated(as_report(report), gate)
    r = view.report
    fail_on = view.fail_on
    corpora = ",".join(r.corpora) or "corpus"
    classname = _xml(f"splitaudit.{corpora}")
    suite = ET.Element("testsuite", name="splitaudit leakage audit")
    if r.created_at:
        # JUnit's timestamp is ISO 8601 without a zone: drop the UTC offset the report carries.
        suite.set("timestamp", _xml(r.created_at[:19]))
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("schema", r.schema_),
        ("audit_id", r.audit_id),
        ("corpora", corpora),
        ("fail_on", ",".join(fail_on)),
        ("thresholds", json.dumps(r.thresholds or {}, sort_keys=True)),
        ("model", json.dumps(r.model or {}, sort_keys=True, default=str)),
    ):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=_xml(value))
    tests = failures = errors = 0
    failed_by_key = {f.key: f for f in r.failed}
    for item in r.items:
        key = item.key
        case = ET.SubElement(suite, "testcase", classname=classname, name=_xml(key), time="0")
        tests += 1
        counted = view.counted(item)
        failing_item = view.item_failed(item)
        if key in failed_by_key:
            errors += 1
            reason = _xml(failed_by_key.pop(key).reason)
            ET.SubElement(case, "error", message=reason, type="unreadable").text = reason
        elif failing_item:
            failures += 1
            failing = [m for m in counted if m.kind in fail_on] or counted
            others = [m for m in counted if m not in failing]
            message = _describe(failing[0]) if failing else "flagged"
            if len(failing) > 1:
                message += f" (+{len(failing) - 1} more)"
            body = f"test item: {key}" + (f" (label {item.label})" if item.label else "")
            body += "\n" + _match_lines(failing)
            if others:
                body += "\nalso (not failing the gate):\n" + _match_lines(others)
            kind = failing[0].kind if failing else "flagged"
            failure = ET.SubElement(case, "failure", message=_xml(message), type=_xml(kind))
            failure.text = _xml(body)
        notes = []
        if counted and not failing_item:
            notes.append("matches in tiers that do not fail the gate:\n" + _match_lines(counted))
        suppressed = view.suppressed(item)
        if suppressed:
            notes.append(
                "suppressed (reviewed not_duplicate or in baseline):\n"
                + "\n".join(f"[{by}] " + _match_lines([m]) for by, m in suppressed)
            )
        if notes:
            ET.SubElement(case, "system-out").text = _xml("\n".join(notes))
    for key, failed in failed_by_key.items():
        case = ET.SubElement(suite, "testcase", classname=classname, name=_xml(key), time="0")
        reason = _xml(failed.reason)
        ET.SubElement(case, "error", message=reason, type="unreadable").text = reason
        tests += 1
        errors += 1
    counts = {
        "tests": str(tests),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": "0",
        "time": "0",
    }
    suite.attrib.update(counts)
    root = ET.Element("testsuites", {"name": "splitaudit", **counts})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---------------------------------------------------------------- Markdown


# Markdown that data can use to change the page: HTML (``<script>``, ``<img onerror>``), links and
# images (``[x](javascript:...)``), emphasis, code spans, and the table's own ``|`` and line breaks.
_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_BACKSLASHED = frozenset("\\`*_~[]|")


def _md(text: Any) -> str:
    """Text from the data as inert Markdown: HTML-escaped, Markdown punctuation backslashed,
    one line (safe inside a table cell)."""
    out = []
    for ch in "" if text is None else str(text):
        if ch in _MD_ENTITIES:
            out.append(_MD_ENTITIES[ch])
        elif ch in _MD_BACKSLASHED:
            out.append("\\" + ch)
        elif ch in "\r\n":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def _code(text: Any) -> str:
    """Inline code for a key or name; escaped plain text when it holds HTML characters.

    Code spans show their text literally (no HTML, no escapes), so only ``|`` (the table
    splits on it first) and line breaks need care; the fence is longer than any backtick run.
    """
    s = "" if text is None else str(text)
    if any(ch in s for ch in _MD_ENTITIES):
        return _md(s)
    s = s.replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    longest = max((len(run) for run in re.findall("`+", s)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {s} {fence}" if longest else f"`{s}`"


def _kind(kind: Any) -> str:
    """A tier name as it is (ours), anything else escaped."""
    return str(kind) if kind in TIERS else _md(kind)


def render_markdown(
    report: ReportInput, *, gate: GateView | None = None, top: int = MARKDOWN_TOP
) -> str:
    """Markdown: verdict, a table per tier, top flagged items (fits a GitHub step summary)."""
    view = Gated(as_report(report), gate)
    r, g = view.report, view.gate
    fail_on = view.fail_on
    flagged = [i for i in r.items if view.item_failed(i)]
    failed = r.failed
    total = view.readable()
    corpora = ", ".join(_code(c) for c in r.corpora)
    lines = ["## splitaudit leakage audit", ""]
    if g is not None:
        status = {"passed": "**Gate passed**", "failed": "**Gate FAILED**"}.get(
            g.status, "**Gate ERROR**"
        )
        reasons = [*g.errors, *g.reasons]
        lines.append(status + (": " + "; ".join(_md(x) for x in reasons) if reasons else ""))
        lines.append("")
    rate = len(flagged) / total if total else 0.0
    lines.append(
        f"{len(flagged)} of {total} readable test images flagged ({rate:.2%})"
        + (f" against {corpora}" if corpora else "")
        + "."
    )
    if g is not None:
        p = g.policy
        policy = f"fail on {', '.join(fail_on) or '(none)'}"
        if p.max_rate is not None:  # None: only a count limit is in force
            policy += f", max rate {p.max_rate:.4g}"
        if p.max_count is not None:
            policy += f", max count {p.max_count}"
        lines.append(f"Policy: {policy}" + (f" (from {_code(p.source)})" if p.source else "") + ".")
    lines += ["", "| tier | flagged images | fails the gate |", "|---|---:|:---:|"]
    counts = view.tier_counts()
    for tier in TIERS:
        lines.append(f"| {tier} | {counts[tier]} | {'yes' if tier in fail_on else 'no'} |")
    lines.append("")
    notes = _markdown_notes(r, g)
    if notes:
        lines += [*notes, ""]
    if flagged:
        shown = flagged[:top]
        lines += [
            f"### Flagged test images ({len(shown)} of {len(flagged)})",
            "",
            "| test image | label | tier | matched | score / evidence |",
            "|---|---|---|---|---|",
        ]
        for item in shown:
            counted = view.counted(item)
            failing = [m for m in counted if m.kind in fail_on] or counted
            more = f" (+{len(counted) - 1} more)" if len(counted) > 1 else ""
            cells = (
                f"{_kind(failing[0].kind)} | {_code(_target(failing[0]))}{more} | {_md(_score(failing[0]))}"
                if failing
                else f" | {more} | "
            )
            lines.append(f"| {_code(item.key)} | {_md(item.label)} | {cells} |")
        lines.append("")
    if failed:
        lines += ["<details><summary>Unreadable test images (not audited)</summary>", ""]
        lines += [f"- {_code(f.key)}: {_md(f.reason)}" for f in failed[:top]]
        if len(failed) > top:
            lines.append(f"- ... and {len(failed) - top} more")
        lines += ["", "</details>", ""]
    return "\n".join(lines)


def _markdown_notes(r: Report, g: GateView | None) -> list[str]:
    """The notes under the tier table: suppressions, stale baseline, unreadable, skipped tiers."""
    notes = []
    if g is not None:
        by = [s.by for s in g.suppressed]
        if by:
            notes.append(
                f"Matches not counted: {by.count('review')} reviewed not_duplicate, "
                f"{by.count('baseline')} in baseline."
            )
        stale = g.stale_baseline
        if stale:
            notes.append(
                f"{len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'} matched "
                f"nothing; remove with `splitaudit baseline prune` "
                f"{_code(g.baseline or 'BASELINE')} `--report REPORT.json`."
            )
    if r.failed:
        n = len(r.failed)
        notes.append(
            f"{n} test image{'' if n == 1 else 's'} could not be read, so "
            f"{'was' if n == 1 else 'were'} not audited (listed below)."
        )
    status, reason = semantic_status(r)
    if status != "ok":
        notes.append(f"Semantic tier {status}: {_md(reason or 'no reason given')}.")
    source = (r.model or {}).get("thresholds")
    if isinstance(source, Mapping) and source.get("summary"):
        notes.append(
            f"Cosine thresholds ({_md(str(source.get('source')))}): {_md(str(source['summary']))}."
        )
    return notes
