"""Render a ``splitaudit.report/v1`` dict as JSON, CSV, JUnit XML or Markdown.

When the report carries a ``gate`` section (added by ``splitaudit.indexer.gate.apply_gate``), an item
fails when the gate flagged it and suppressed matches are marked as such. Without one (the
server's plain report endpoint), an item fails when it has any match not reviewed
``not_duplicate``.

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
from splitaudit.indexer.kinds import MATCH_KINDS, MatchKind
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


def render(report: Mapping[str, Any], fmt: str) -> str:
    """The report in format ``fmt`` (json, csv, junit or md); ``UsageError`` for anything else."""
    name = _ALIASES.get(fmt.lower(), fmt.lower())
    renderers: dict[str, Callable[[Mapping[str, Any]], str]] = {
        "json": render_json,
        "csv": render_csv,
        "junit": render_junit,
        "md": render_markdown,
    }
    if name not in renderers:
        raise UsageError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderers[name](report)


def render_json(report: Mapping[str, Any]) -> str:
    """The report as indented JSON (UTF-8 text, keys in their given order)."""
    return json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"


# ---------------------------------------------------------------- shared reading helpers


def _is_review_suppressed(match: Mapping[str, Any]) -> bool:
    review = match.get("review")
    return isinstance(review, Mapping) and review.get("verdict") == "not_duplicate"


def _suppressed_by(match: Mapping[str, Any]) -> str | None:
    """``review``/``baseline`` when the match does not count, else None."""
    if "suppressed_by" in match:
        return match["suppressed_by"]
    return "review" if _is_review_suppressed(match) else None


def _counted(item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The item's matches that count (not suppressed)."""
    return [m for m in item.get("matches", []) if _suppressed_by(m) is None]


def _fail_on(report: Mapping[str, Any]) -> tuple[str, ...]:
    """Tiers that fail an item: the gate policy's, else every tier."""
    gate = report.get("gate")
    if isinstance(gate, Mapping):
        return tuple(gate.get("policy", {}).get("fail_on", TIERS))
    return TIERS


def _item_failed(item: Mapping[str, Any], report: Mapping[str, Any]) -> bool:
    """Whether the item fails: per the gate when present, else any counted match."""
    if isinstance(report.get("gate"), Mapping):
        return bool(item.get("gate_failed"))
    return bool(_counted(item))


def _failed_entries(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Unreadable split items (``failed[]``)."""
    return [f for f in report.get("failed") or [] if isinstance(f, Mapping)]


def _tier_counts(report: Mapping[str, Any]) -> dict[str, int]:
    """Flagged images per tier: the gate's counts (after suppression), else the summary's."""
    gate = report.get("gate")
    if isinstance(gate, Mapping) and isinstance(gate.get("counts"), Mapping):
        return {t: int(gate["counts"].get(t, 0)) for t in TIERS}
    by_kind = (report.get("summary") or {}).get("by_kind") or {}
    return {t: int(by_kind.get(t, 0)) for t in TIERS}


def _target(match: Mapping[str, Any]) -> str:
    """``corpus:key`` of the matched corpus item, or ``own metadata`` for a self label leak."""
    if match.get("corpus_key") is None and match.get("kind") == MatchKind.LABEL_LEAK:
        return "own metadata"
    return f"{match.get('corpus') or '?'}:{match.get('corpus_key') or match.get('uri') or '?'}"


def _evidence_text(evidence: Any) -> str:
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
        text = _evidence_text(first) if isinstance(first, Mapping) else str(first)
        return text + (f" (+{more} more)" if more > 0 else "")
    if isinstance(evidence, Mapping):
        term, where = evidence.get("term"), evidence.get("field")
        if term and where:
            snippet = evidence.get("context") or evidence.get("match") or ""
            return f"'{term!s}' in {where!s}" + (f": {snippet!s}" if snippet else "")
    text = json.dumps(evidence, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def _score(match: Mapping[str, Any]) -> str:
    """``hamming 3, cosine 0.973`` (whatever the match has)."""
    parts = []
    if match.get("hamming") is not None:
        parts.append(f"hamming {match['hamming']}")
    if match.get("cosine") is not None:
        parts.append(f"cosine {float(match['cosine']):.3f}")
    if not parts and match.get("kind") == MatchKind.LABEL_LEAK:
        return _evidence_text(match.get("evidence"))
    region = _region_text(match.get("evidence"))
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
    x0, y0, x1, y1 = (round(100 * float(v)) for v in box)
    mirrored = ", mirrored" if geometry.get("mirrored") else ""
    return (
        f"region x {x0}-{x1}% y {y0}-{y1}% of the corpus image (scale {geometry.get('scale')}, "
        f"rotated {geometry.get('angle')}°{mirrored}, {geometry.get('inliers')} inliers)"
    )


def _describe(match: Mapping[str, Any]) -> str:
    """One line: ``near duplicate of laion:000123 (hamming 3)``."""
    kind = str(match.get("kind"))
    if kind == MatchKind.LABEL_LEAK:
        what = f"label leak via {_target(match)}"
    elif kind == "semantic":
        what = f"semantic match of {_target(match)}"
    else:
        what = f"{kind} duplicate of {_target(match)}"
    score = _score(match)
    return f"{what} ({score})" if score else what


# ---------------------------------------------------------------- CSV


def _csv_rows(report: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """One dict per CSV row."""
    gated = isinstance(report.get("gate"), Mapping)
    seen: set[str] = set()
    for item in report.get("items", []):
        seen.add(str(item.get("key")))
        base = {
            "key": item.get("key"),
            "label": item.get("label"),
            "verdict": item.get("verdict"),
            "gate_failed": ("true" if item.get("gate_failed") else "false") if gated else "",
            "sha256": item.get("sha256"),
        }
        matches = item.get("matches") or []
        if not matches:
            yield base
        for m in matches:
            review = m.get("review") if isinstance(m.get("review"), Mapping) else {}
            yield {
                **base,
                "kind": m.get("kind"),
                "corpus": m.get("corpus"),
                "corpus_key": m.get("corpus_key"),
                "uri": m.get("uri"),
                "cosine": m.get("cosine"),
                "hamming": m.get("hamming"),
                "match_id": m.get("id"),
                "review": review.get("verdict"),
                "suppressed_by": _suppressed_by(m),
                "evidence": json.dumps(
                    m["evidence"], ensure_ascii=False, sort_keys=True, default=str
                )
                if m.get("evidence")
                else "",
            }
    for failed in _failed_entries(report):
        if str(failed.get("key")) not in seen:
            yield {
                "key": failed.get("key"),
                "verdict": "failed",
                "error": failed.get("reason"),
                "gate_failed": "false" if gated else "",
            }


def render_csv(report: Mapping[str, Any]) -> str:
    """One row per match (plus one per clean or unreadable item); columns ``CSV_COLUMNS``."""
    return csv_text(_csv_rows(report), CSV_COLUMNS)


# ---------------------------------------------------------------- JUnit XML


def _xml(text: Any) -> str:
    """Text XML 1.0 can carry."""
    return _XML_ILLEGAL.sub("\ufffd", "" if text is None else str(text))


def _match_lines(matches: list[Mapping[str, Any]]) -> str:
    """Details of matches, one per line, for failure bodies and system-out."""
    lines = []
    for m in matches:
        line = f"{m.get('kind')}: {_target(m)}"
        for label, value in (
            ("score", _score(m)),
            ("uri", m.get("uri")),
            ("match id", m.get("id")),
        ):
            if value not in (None, ""):
                line += f" | {label}: {value}"
        if m.get("kind") != MatchKind.LABEL_LEAK and m.get("evidence"):
            line += f" | evidence: {_evidence_text(m.get('evidence'))}"
        lines.append(line)
    return "\n".join(lines)


def render_junit(report: Mapping[str, Any]) -> str:
    """JUnit XML: one testcase per test image; flagged -> ``<failure>``, unreadable -> ``<error>``."""
    fail_on = _fail_on(report)
    corpora = ",".join(str(c) for c in report.get("corpora") or []) or "corpus"
    classname = _xml(f"splitaudit.{corpora}")
    suite = ET.Element("testsuite", name="splitaudit leakage audit")
    if report.get("created_at"):
        # JUnit's timestamp is ISO 8601 without a zone: drop the UTC offset the report carries.
        suite.set("timestamp", _xml(str(report["created_at"])[:19]))
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("schema", report.get("schema")),
        ("audit_id", report.get("audit_id")),
        ("corpora", corpora),
        ("fail_on", ",".join(fail_on)),
        ("thresholds", json.dumps(report.get("thresholds") or {}, sort_keys=True)),
        ("model", json.dumps(report.get("model") or {}, sort_keys=True, default=str)),
    ):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=_xml(value))
    tests = failures = errors = 0
    failed_by_key = {str(f.get("key")): f for f in _failed_entries(report)}
    for item in report.get("items", []):
        key = str(item.get("key"))
        case = ET.SubElement(suite, "testcase", classname=classname, name=_xml(key), time="0")
        tests += 1
        counted = _counted(item)
        if key in failed_by_key:
            errors += 1
            reason = _xml(failed_by_key.pop(key).get("reason"))
            ET.SubElement(case, "error", message=reason, type="unreadable").text = reason
        elif _item_failed(item, report):
            failures += 1
            failing = [m for m in counted if m.get("kind") in fail_on] or counted
            others = [m for m in counted if m not in failing]
            message = _describe(failing[0]) if failing else "flagged"
            if len(failing) > 1:
                message += f" (+{len(failing) - 1} more)"
            body = f"test item: {key}" + (f" (label {item['label']})" if item.get("label") else "")
            body += "\n" + _match_lines(failing)
            if others:
                body += "\nalso (not failing the gate):\n" + _match_lines(others)
            kind = failing[0].get("kind") if failing else "flagged"
            failure = ET.SubElement(case, "failure", message=_xml(message), type=_xml(kind))
            failure.text = _xml(body)
        notes = []
        if counted and not _item_failed(item, report):
            notes.append("matches in tiers that do not fail the gate:\n" + _match_lines(counted))
        suppressed = [m for m in item.get("matches", []) if _suppressed_by(m) is not None]
        if suppressed:
            notes.append(
                "suppressed (reviewed not_duplicate or in baseline):\n"
                + "\n".join(f"[{_suppressed_by(m)}] " + _match_lines([m]) for m in suppressed)
            )
        if notes:
            ET.SubElement(case, "system-out").text = _xml("\n".join(notes))
    for key, failed in failed_by_key.items():
        case = ET.SubElement(suite, "testcase", classname=classname, name=_xml(key), time="0")
        reason = _xml(failed.get("reason"))
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


def render_markdown(report: Mapping[str, Any], *, top: int = MARKDOWN_TOP) -> str:
    """Markdown: verdict, a table per tier, top flagged items (fits a GitHub step summary)."""
    gate = report.get("gate") if isinstance(report.get("gate"), Mapping) else None
    summary = report.get("summary") or {}
    fail_on = _fail_on(report)
    items = list(report.get("items", []))
    flagged = [i for i in items if _item_failed(i, report)]
    failed = _failed_entries(report)
    total = int(gate["readable"]) if gate else int(summary.get("readable", len(items)))
    corpora = ", ".join(_code(c) for c in report.get("corpora") or [])
    lines = ["## splitaudit leakage audit", ""]
    if gate:
        status = {"passed": "**Gate passed**", "failed": "**Gate FAILED**"}.get(
            gate.get("status"), "**Gate ERROR**"
        )
        reasons = list(gate.get("errors") or []) + list(gate.get("reasons") or [])
        lines.append(status + (": " + "; ".join(_md(r) for r in reasons) if reasons else ""))
        lines.append("")
    rate = len(flagged) / total if total else 0.0
    lines.append(
        f"{len(flagged)} of {total} readable test images flagged ({rate:.2%})"
        + (f" against {corpora}" if corpora else "")
        + "."
    )
    if gate:
        p = gate.get("policy") or {}
        policy = f"fail on {', '.join(fail_on) or '(none)'}, max rate {p.get('max_rate')}"
        if p.get("max_count") is not None:
            policy += f", max count {p['max_count']}"
        lines.append(
            f"Policy: {policy}" + (f" (from {_code(p['source'])})" if p.get("source") else "") + "."
        )
    lines += ["", "| tier | flagged images | fails the gate |", "|---|---:|:---:|"]
    counts = _tier_counts(report)
    for tier in TIERS:
        lines.append(f"| {tier} | {counts[tier]} | {'yes' if tier in fail_on else 'no'} |")
    lines.append("")
    notes = []
    if gate:
        by = [s.get("by") for s in gate.get("suppressed") or []]
        if by:
            notes.append(
                f"Matches not counted: {by.count('review')} reviewed not_duplicate, "
                f"{by.count('baseline')} in baseline."
            )
        stale = gate.get("stale_baseline") or []
        if stale:
            notes.append(
                f"{len(stale)} stale baseline entr{'y' if len(stale) == 1 else 'ies'} matched "
                f"nothing; remove with `splitaudit baseline prune` "
                f"{_code(gate.get('baseline') or 'BASELINE')} `--report REPORT.json`."
            )
    if failed:
        notes.append(
            f"{len(failed)} test image{'' if len(failed) == 1 else 's'} could not be read, so "
            f"{'was' if len(failed) == 1 else 'were'} not audited (listed below)."
        )
    status, reason = semantic_status(report)
    if status != "ok":
        notes.append(f"Semantic tier {status}: {_md(reason or 'no reason given')}.")
    source = (
        (report.get("model") or {}).get("thresholds")
        if isinstance(report.get("model"), Mapping)
        else None
    )
    if isinstance(source, Mapping) and source.get("summary"):
        notes.append(
            f"Cosine thresholds ({_md(str(source.get('source')))}): {_md(str(source['summary']))}."
        )
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
            counted = _counted(item)
            failing = [m for m in counted if m.get("kind") in fail_on] or counted
            m = failing[0] if failing else {}
            more = f" (+{len(counted) - 1} more)" if len(counted) > 1 else ""
            lines.append(
                f"| {_code(item.get('key'))} | {_md(item.get('label'))} | {_kind(m.get('kind'))} | "
                f"{_code(_target(m)) if m else ''}{more} | {_md(_score(m)) if m else ''} |"
            )
        lines.append("")
    if failed:
        lines += ["<details><summary>Unreadable test images (not audited)</summary>", ""]
        lines += [f"- {_code(f.get('key'))}: {_md(f.get('reason'))}" for f in failed[:top]]
        if len(failed) > top:
            lines.append(f"- ... and {len(failed) - top} more")
        lines += ["", "</details>", ""]
    return "\n".join(lines)
