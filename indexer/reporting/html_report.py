"""Render a report as one self-contained HTML page: summary, tier counts, flagged pairs side by side.

Everything is inline (CSS, thumbnails as data URIs), so the file opens from disk or as a CI
artifact without any request leaving the page. Large reports are capped: the first
``HTML_MAX_PAIRS`` pairs, strongest first, and the count of the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from splitaudit.indexer.kinds import KIND_RANK, TIER_BY_KIND
from splitaudit.indexer.kinds import TIERS as TIERS_REGISTRY
from splitaudit.indexer.reporting.evidence_lines import Box, evidence_lines, region_box
from splitaudit.indexer.reporting.formats import TIERS, Gated, ReportInput, evidence_text
from splitaudit.indexer.reporting.html_thumbs import (
    EmbeddedImage,
    Side,
    ThumbnailFetcher,
    embed_thumbnails,
    pair_item_ids,
)
from splitaudit.indexer.reporting.models import GateView, ReportItem, ReportMatch, as_report
from splitaudit.indexer.reporting.report import semantic_status

HTML_MAX_PAIRS = 500
# No request may leave the page: no scripts, no external resources at all. The API serves the
# page with this policy too (plus frame-ancestors), so its inline styles apply there.
PAGE_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:16px 24px;
color:#1d232b;background:#f6f7f9}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:24px 0 8px}
.muted{color:#5b6673}.gate{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}
.gate.passed{background:#e3f4e6;color:#17612a}.gate.failed{background:#fbe5e4;color:#8d1c17}
.gate.error{background:#fff3d6;color:#7a5200}
table.counts{border-collapse:collapse;background:#fff}
table.counts td,table.counts th{border:1px solid #d9dde3;padding:4px 12px;text-align:left}
.pair{display:grid;grid-template-columns:200px 1fr 200px;gap:14px;background:#fff;border:1px solid #d9dde3;
border-radius:6px;padding:12px;margin:10px 0}
.pair.suppressed{opacity:.6}.side{font-size:12px;word-break:break-all}
.side img{display:block;max-width:180px;max-height:180px;border:1px solid #ccd;margin-bottom:6px}
.noimg{width:160px;height:100px;display:flex;align-items:center;justify-content:center;text-align:center;
background:#eceff3;color:#5b6673;font-size:11px;padding:6px;margin-bottom:6px;overflow:hidden}
.kind{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff}
dl{margin:6px 0;display:grid;grid-template-columns:auto 1fr;gap:2px 10px}
dt{color:#5b6673}dd{margin:0;word-break:break-all}code{font-size:12px}
.frame{position:relative;display:inline-block;margin-bottom:6px}.frame img{margin-bottom:0}
.frame svg{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}
ul.evidence{margin:0;padding-left:16px}
"""
# Tier badges from the tier registry (a new tier gets its colour without touching this file).
_CSS += "".join(f".kind.{t.kind.value}{{background:{t.colour}}}" for t in TIERS_REGISTRY) + "\n"


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


Pair = tuple[ReportItem, int]  # a test item and the index of one of its matches


def flagged_pairs(report: ReportInput) -> list[tuple[ReportItem, ReportMatch]]:
    """Every (test item, match) pair, strongest first (what the page shows, in its order)."""
    return [(item, item.matches[i]) for item, i in _ranked_pairs(report)]


def _ranked_pairs(report: ReportInput) -> list[Pair]:
    """Every (test item, match index) pair, strongest first: exact, near, semantic, label leak, then by score.

    Gate suppression does not reorder pairs, so the pairs shown are the same with or without a gate.
    """
    items = as_report(report).items
    pairs = [(item, i) for item in items for i in range(len(item.matches))]
    return sorted(
        pairs,
        key=lambda p: (
            KIND_RANK.get(str(p[0].matches[p[1]].kind), 9),
            -float(p[0].matches[p[1]].score or 0.0),
            p[0].key,
        ),
    )


def pair_thumbnails(
    report: ReportInput, fetch: ThumbnailFetcher, *, limit: int = HTML_MAX_PAIRS
) -> dict[tuple[Side, int], EmbeddedImage]:
    """The embedded thumbnails of the pairs ``render_html`` shows (each image fetched once)."""
    return embed_thumbnails(pair_item_ids(flagged_pairs(report)[:limit]), fetch)


def _image(
    thumbnails: Mapping[tuple[Side, int], EmbeddedImage],
    side: Side,
    item_id: Any,
    alt: str,
    box: Box | None = None,
) -> str:
    if item_id is None:
        return '<div class="noimg">no image: the match is in the test item\'s own metadata</div>'
    found = thumbnails.get((side, int(item_id)))
    if found is None:
        return '<div class="noimg">thumbnail not embedded</div>'
    if found.uri is None:
        return f'<div class="noimg" title="{_e(found.reason)}">image not available: {_e(found.reason)}</div>'
    img = f'<img src="{found.uri}" alt="{_e(alt)}">'
    if box is None:
        return img
    x0, y0, x1, y1 = box
    what = "the test image" if side == "corpus" else "the corpus image"
    return (
        f'<div class="frame">{img}<svg class="region" viewBox="0 0 1 1" preserveAspectRatio="none" '
        f'role="img" aria-label="where {what} lies">'
        f'<rect x="{x0:.4f}" y="{y0:.4f}" width="{x1 - x0:.4f}" height="{y1 - y0:.4f}" fill="none" '
        'stroke="#e0115f" stroke-width="3" vector-effect="non-scaling-stroke"/></svg></div>'
    )


def _evidence(m: ReportMatch) -> str:
    """Image evidence as a list of readable lines; text tiers' evidence (label, caption) as one."""
    tier = TIER_BY_KIND.get(str(m.kind))
    if tier is None or not tier.image:
        return _e(evidence_text(m.evidence))
    lines = evidence_lines(m.evidence)
    if not lines:
        return ""
    return '<ul class="evidence">' + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>"


class _Html(str):
    """A field value that is already HTML (escaped where it came from)."""


def _fields(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<dt>{_e(k)}</dt><dd>{v if isinstance(v, _Html) else _e(v)}</dd>"
        for k, v in rows
        if v not in (None, "", {}, [])
    )
    return f"<dl>{cells}</dl>" if cells else ""


def _pair(view: Gated, pair: Pair, thumbnails: Mapping[tuple[Side, int], EmbeddedImage]) -> str:
    item, index = pair
    m: ReportMatch = item.matches[index]
    kind = str(m.kind)
    review = m.review
    suppressed = view.suppressed_by(item, index)
    scores: list[tuple[str, Any]] = [
        ("hamming", m.hamming),
        ("cosine", None if m.cosine is None else f"{float(m.cosine):.4f}"),
        ("evidence", _Html(_evidence(m))),
        (
            "review",
            f"{review.verdict}" + (f" ({review.note})" if review.note else "") if review else None,
        ),
        ("not counted", f"suppressed by {suppressed}" if suppressed else None),
        ("match id", m.id),
    ]
    test = _fields([("test image", item.key), ("label", item.label), ("sha256", item.sha256)])
    test_box = region_box(m.evidence, on_test=True)
    corpus_box = region_box(m.evidence, on_test=False)
    own = m.corpus_item_id is None
    corpus = (
        _fields(
            [
                ("corpus", m.corpus),
                ("key", m.corpus_key),
                ("uri", m.uri),
                ("url", m.url),
                ("caption", m.caption),
                ("label", m.label),
                ("licence", m.license),
                ("shard", m.shard),
            ]
        )
        if not own
        else "<p class='muted'>own filename / path / metadata</p>"
    )
    return (
        f'<section class="pair{" suppressed" if suppressed else ""}" data-kind="{_e(kind)}">'
        f'<div class="side">{_image(thumbnails, "split", item.split_item_id, item.key, test_box)}'
        f"{test}</div>"
        f'<div><span class="kind {_e(kind)}">{_e(kind.replace("_", " "))}</span>{_fields(scores)}</div>'
        f'<div class="side">'
        f"{_image(thumbnails, 'corpus', m.corpus_item_id, str(m.corpus_key), corpus_box)}"
        f"{corpus}</div></section>"
    )


def _gate_block(gate: GateView | None) -> str:
    if gate is None:
        return ""
    status = gate.status
    label = {"passed": "Gate passed", "failed": "Gate FAILED"}.get(status, "Gate ERROR")
    reasons = [*gate.errors, *gate.reasons]
    cls = status if status in ("passed", "failed") else "error"
    return f'<div class="gate {cls}">{_e(label)}{": " + _e("; ".join(reasons)) if reasons else ""}</div>'


def render_html(
    report: ReportInput,
    *,
    thumbnails: Mapping[tuple[Side, int], EmbeddedImage],
    gate: GateView | None = None,
    limit: int = HTML_MAX_PAIRS,
) -> str:
    """The report as one HTML page; ``thumbnails`` holds the embedded images of the pairs shown."""
    view = Gated(as_report(report), gate)
    r = view.report
    flagged = [i for i in r.items if view.item_failed(i)]
    failed = r.failed
    total = view.readable()
    rate = len(flagged) / total if total else 0.0
    name = r.split.name if r.split else None
    title = f"splitaudit report{f': {name}' if name else ''}"
    model = r.model or {}
    meta = _fields(
        [
            ("audit", r.audit_id),
            ("corpora", ", ".join(r.corpora)),
            ("model", model.get("id") or model.get("model_id")),
            ("created", r.created_at),
            ("finished", r.finished_at),
            ("code version", r.code_version),
        ]
    )
    counts = view.tier_counts()
    fail_on = view.fail_on
    rows = "".join(
        f"<tr><td>{_e(t)}</td><td>{counts[t]}</td><td>{'yes' if t in fail_on else 'no'}</td></tr>"
        for t in TIERS
    )
    notes = []
    status, reason = semantic_status(r)
    if status != "ok":
        notes.append(f"Semantic tier {status}: {reason or 'no reason given'}.")
    if failed:
        notes.append(
            f"{len(failed)} test image{'' if len(failed) == 1 else 's'} could not be read (listed below)."
        )
    if r.split_duplicates:
        notes.append(f"{len(r.split_duplicates)} duplicate pairs inside the split itself.")
    pairs = _ranked_pairs(r)
    shown = pairs[:limit]
    rest = len(pairs) - len(shown)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        meta,
        _gate_block(view.gate),
        f'<p id="summary"><strong>{len(flagged)}</strong> of <strong>{total}</strong> readable test images '
        f"flagged ({rate:.2%}).</p>",
        '<table class="counts"><tr><th>tier</th><th>flagged images</th><th>fails the gate</th></tr>'
        f"{rows}</table>",
        *(f'<p class="muted">{_e(n)}</p>' for n in notes),
        f'<h2 id="pairs">Flagged pairs ({len(shown)} of {len(pairs)})</h2>',
    ]
    if not pairs:
        parts.append("<p>No matches: every readable test image is clean.</p>")
    parts += [_pair(view, pair, thumbnails) for pair in shown]
    if rest:
        parts.append(
            f'<p id="more" class="muted">{rest} more pair{"" if rest == 1 else "s"} not shown; '
            "the JSON or CSV report lists them all.</p>"
        )
    if failed:
        parts.append("<h2>Unreadable test images</h2><ul>")
        parts += [f"<li><code>{_e(f.key)}</code>: {_e(f.reason)}</li>" for f in failed[:limit]]
        if len(failed) > limit:
            parts.append(f"<li>... and {len(failed) - limit} more</li>")
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def html_page(
    report: ReportInput,
    fetch: ThumbnailFetcher,
    *,
    gate: GateView | None = None,
    limit: int = HTML_MAX_PAIRS,
) -> str:
    """The HTML page with the shown pairs' thumbnails fetched through ``fetch`` (REST, demo)."""
    report = as_report(report)
    thumbnails = pair_thumbnails(report, fetch, limit=limit)
    return render_html(report, thumbnails=thumbnails, gate=gate, limit=limit)
