"""Render a report as one self-contained HTML page: summary, tier counts, flagged pairs side by side.

Everything is inline (CSS, thumbnails as data URIs), so the file opens from disk or as a CI
artifact without any request leaving the page. Large reports are capped: the first
``HTML_MAX_PAIRS`` pairs, strongest first, and the count of the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from splitaudit.indexer.kinds import KIND_RANK
from splitaudit.indexer.reporting.formats import (
    TIERS,
    _evidence_text,
    _fail_on,
    _failed_entries,
    _item_failed,
    _suppressed_by,
    _tier_counts,
)
from splitaudit.indexer.reporting.html_thumbs import (
    EmbeddedImage,
    Side,
    ThumbnailFetcher,
    embed_thumbnails,
    pair_item_ids,
)
from splitaudit.indexer.reporting.report import semantic_status

HTML_MAX_PAIRS = 500

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
.kind.exact{background:#b3261e}.kind.near{background:#d4670b}.kind.semantic{background:#2f63c6}
.kind.label_leak{background:#7a3fb0}dl{margin:6px 0;display:grid;grid-template-columns:auto 1fr;gap:2px 10px}
dt{color:#5b6673}dd{margin:0;word-break:break-all}code{font-size:12px}
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def flagged_pairs(report: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Every (test item, match) pair, strongest first: exact, near, semantic, label leak, then by score.

    Gate suppression does not reorder pairs, so the pairs shown are the same with or without a gate.
    """
    pairs = [(item, m) for item in report.get("items", []) for m in item.get("matches", [])]
    return sorted(
        pairs,
        key=lambda p: (
            KIND_RANK.get(str(p[1].get("kind")), 9),
            -float(p[1].get("score") or 0.0),
            str(p[0].get("key")),
        ),
    )


def pair_thumbnails(
    report: Mapping[str, Any], fetch: ThumbnailFetcher, *, limit: int = HTML_MAX_PAIRS
) -> dict[tuple[Side, int], EmbeddedImage]:
    """The embedded thumbnails of the pairs ``render_html`` shows (each image fetched once)."""
    return embed_thumbnails(pair_item_ids(flagged_pairs(report)[:limit]), fetch)


def _image(
    thumbnails: Mapping[tuple[Side, int], EmbeddedImage], side: Side, item_id: Any, alt: str
) -> str:
    if item_id is None:
        return '<div class="noimg">no image: the match is in the test item\'s own metadata</div>'
    found = thumbnails.get((side, int(item_id)))
    if found is None:
        return '<div class="noimg">thumbnail not embedded</div>'
    if found.uri is None:
        return f'<div class="noimg" title="{_e(found.reason)}">image not available: {_e(found.reason)}</div>'
    return f'<img src="{found.uri}" alt="{_e(alt)}">'


def _fields(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows if v not in (None, "", {}, [])
    )
    return f"<dl>{cells}</dl>" if cells else ""


def _pair(
    item: Mapping[str, Any],
    m: Mapping[str, Any],
    thumbnails: Mapping[tuple[Side, int], EmbeddedImage],
) -> str:
    kind = str(m.get("kind"))
    review = m.get("review") if isinstance(m.get("review"), Mapping) else None
    suppressed = _suppressed_by(m)
    scores: list[tuple[str, Any]] = [
        ("hamming", m.get("hamming")),
        ("cosine", None if m.get("cosine") is None else f"{float(m['cosine']):.4f}"),
        ("evidence", _evidence_text(m.get("evidence"))),
        (
            "review",
            f"{review.get('verdict')}" + (f" ({review['note']})" if review.get("note") else "")
            if review
            else None,
        ),
        ("not counted", f"suppressed by {suppressed}" if suppressed else None),
        ("match id", m.get("id")),
    ]
    test = _fields(
        [
            ("test image", item.get("key")),
            ("label", item.get("label")),
            ("sha256", item.get("sha256")),
        ]
    )
    own = m.get("corpus_item_id") is None
    corpus = (
        _fields(
            [
                ("corpus", m.get("corpus")),
                ("key", m.get("corpus_key")),
                ("uri", m.get("uri")),
                ("url", m.get("url")),
                ("caption", m.get("caption")),
                ("label", m.get("label")),
                ("licence", m.get("license")),
                ("shard", m.get("shard")),
            ]
        )
        if not own
        else "<p class='muted'>own filename / path / metadata</p>"
    )
    return (
        f'<section class="pair{" suppressed" if suppressed else ""}" data-kind="{_e(kind)}">'
        f'<div class="side">{_image(thumbnails, "split", item.get("split_item_id"), str(item.get("key")))}{test}</div>'
        f'<div><span class="kind {_e(kind)}">{_e(kind.replace("_", " "))}</span>{_fields(scores)}</div>'
        f'<div class="side">{_image(thumbnails, "corpus", m.get("corpus_item_id"), str(m.get("corpus_key")))}'
        f"{corpus}</div></section>"
    )


def _gate_block(report: Mapping[str, Any]) -> str:
    gate = report.get("gate")
    if not isinstance(gate, Mapping):
        return ""
    status = str(gate.get("status") or "error")
    label = {"passed": "Gate passed", "failed": "Gate FAILED"}.get(status, "Gate ERROR")
    reasons = [str(r) for r in list(gate.get("errors") or []) + list(gate.get("reasons") or [])]
    cls = status if status in ("passed", "failed") else "error"
    return f'<div class="gate {cls}">{_e(label)}{": " + _e("; ".join(reasons)) if reasons else ""}</div>'


def render_html(
    report: Mapping[str, Any],
    *,
    thumbnails: Mapping[tuple[Side, int], EmbeddedImage],
    limit: int = HTML_MAX_PAIRS,
) -> str:
    """The report as one HTML page; ``thumbnails`` holds the embedded images of the pairs shown."""
    summary = report.get("summary") or {}
    items = list(report.get("items", []))
    flagged = [i for i in items if _item_failed(i, report)]
    failed = _failed_entries(report)
    gate = report.get("gate") if isinstance(report.get("gate"), Mapping) else None
    total = (
        int(gate["readable"])
        if gate and gate.get("readable") is not None
        else int(summary.get("readable", len(items)))
    )
    rate = len(flagged) / total if total else 0.0
    split = report.get("split") or {}
    name = split.get("name") if isinstance(split, Mapping) else None
    title = f"splitaudit report{f': {name}' if name else ''}"
    model = report.get("model") or {}
    meta = _fields(
        [
            ("audit", report.get("audit_id")),
            ("corpora", ", ".join(map(str, report.get("corpora") or []))),
            (
                "model",
                model.get("id") or model.get("model_id") if isinstance(model, Mapping) else model,
            ),
            ("created", report.get("created_at")),
            ("finished", report.get("finished_at")),
            ("code version", report.get("code_version")),
        ]
    )
    counts = _tier_counts(report)
    fail_on = _fail_on(report)
    rows = "".join(
        f"<tr><td>{_e(t)}</td><td>{counts[t]}</td><td>{'yes' if t in fail_on else 'no'}</td></tr>"
        for t in TIERS
    )
    notes = []
    status, reason = semantic_status(report)
    if status != "ok":
        notes.append(f"Semantic tier {status}: {reason or 'no reason given'}.")
    if failed:
        notes.append(
            f"{len(failed)} test image{'' if len(failed) == 1 else 's'} could not be read (listed below)."
        )
    if report.get("split_duplicates"):
        notes.append(f"{len(report['split_duplicates'])} duplicate pairs inside the split itself.")
    pairs = flagged_pairs(report)
    shown = pairs[:limit]
    rest = len(pairs) - len(shown)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        # No request may leave the page: no scripts, no external resources at all.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'\">",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        meta,
        _gate_block(report),
        f'<p id="summary"><strong>{len(flagged)}</strong> of <strong>{total}</strong> readable test images '
        f"flagged ({rate:.2%}).</p>",
        '<table class="counts"><tr><th>tier</th><th>flagged images</th><th>fails the gate</th></tr>'
        f"{rows}</table>",
        *(f'<p class="muted">{_e(n)}</p>' for n in notes),
        f'<h2 id="pairs">Flagged pairs ({len(shown)} of {len(pairs)})</h2>',
    ]
    if not pairs:
        parts.append("<p>No matches: every readable test image is clean.</p>")
    parts += [_pair(item, m, thumbnails) for item, m in shown]
    if rest:
        parts.append(
            f'<p id="more" class="muted">{rest} more pair{"" if rest == 1 else "s"} not shown; '
            "the JSON or CSV report lists them all.</p>"
        )
    if failed:
        parts.append("<h2>Unreadable test images</h2><ul>")
        parts += [
            f"<li><code>{_e(f.get('key'))}</code>: {_e(f.get('reason'))}</li>"
            for f in failed[:limit]
        ]
        if len(failed) > limit:
            parts.append(f"<li>... and {len(failed) - limit} more</li>")
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
