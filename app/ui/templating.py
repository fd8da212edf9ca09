"""The UI's Jinja2 environment: template folder, filters and globals (built per app, never at import)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.templating import Jinja2Templates

from splitaudit.app.settings import ApiSettings
from splitaudit.indexer import __version__
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.reporting.report import KINDS
from splitaudit.indexer.review.matches import VERDICTS

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

KIND_NAMES = {kind.value: kind.value.replace("_", " ") for kind in MatchKind}
VERDICT_NAMES = {"duplicate": "duplicate", "not_duplicate": "not duplicate", "unsure": "unsure"}
VERDICT_KEYS = {"duplicate": "d", "not_duplicate": "n", "unsure": "u"}


def _utc(value: str | datetime) -> datetime:
    """A datetime or ISO string as an aware UTC datetime (naive times are UTC); ValueError if unparsable."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def when(value: str | datetime | None) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM UTC`` (naive times are UTC); ``—`` for none."""
    if value is None or value == "":
        return "—"
    try:
        return _utc(value).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return str(value)


def iso_utc(value: str | datetime | None) -> str:
    """An ISO timestamp with an explicit UTC offset (naive times are UTC), for ``datetime`` attributes."""
    if value is None or value == "":
        return ""
    try:
        return _utc(value).isoformat()
    except ValueError:
        return str(value)


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage (``0.1234`` -> ``12.3%``); ``—`` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{float(value) * 100:.{digits}f}%"


def span_parts(text: str | None, span: str | None) -> tuple[str, str, str]:
    """``(before, shared, after)`` of ``text`` around the first occurrence of the normalised
    ``span`` (case, punctuation and spacing ignored); ``(text, "", "")`` when it is not found."""
    text = text or ""
    words = re.findall(r"\w+", span or "")
    if not words:
        return text, "", ""
    found = re.search(r"\W+".join(re.escape(w) for w in words), text, flags=re.IGNORECASE)
    if found is None:
        return text, "", ""
    return text[: found.start()], found.group(0), text[found.end() :]


def num(value: int | float | None) -> str:
    """An integer with thousands separators; ``—`` for none."""
    if value is None:
        return "—"
    return f"{int(value):,}"


def score(value: float | None, digits: int = 3) -> str:
    """A score with fixed decimals; ``—`` for none."""
    if value is None:
        return "—"
    return f"{float(value):.{digits}f}"


def highlight(text: str, match: Mapping[str, Any], field: str = "caption") -> Markup:
    """``text`` escaped, with the spans a label-leak match found in ``field`` wrapped in ``<mark>``."""
    evidence = match.get("evidence") or {}
    spans = sorted(
        (int(h["start"]), int(h["end"]))
        for h in evidence.get("hits", [])
        if match.get("kind") == MatchKind.LABEL_LEAK
        and h.get("field") == field
        and isinstance(h.get("start"), int)
        and isinstance(h.get("end"), int)
        and text[h["start"] : h["end"]] == h.get("match")
    )
    out, at = [], 0
    for start, end in spans:
        if start < at:
            continue
        out.append(escape(text[at:start]))
        out.append(Markup('<mark class="span-hit">') + escape(text[start:end]) + Markup("</mark>"))
        at = end
    out.append(escape(text[at:]))
    return Markup("").join(out)


def _file_version(name: str) -> str:
    path = STATIC_DIR / name
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except OSError:
        return __version__


def build_templates(settings: ApiSettings) -> Jinja2Templates:
    """Templates with the UI's filters and globals (static URLs carry a content hash for caching)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=jinja2.select_autoescape(["html", "svg"], default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    versions: dict[str, str] = {}

    def static_url(name: str) -> str:
        if name not in versions:
            versions[name] = _file_version(name)
        return f"/ui/static/{name}?v={versions[name]}"

    env.filters.update(
        when=when,
        iso_utc=iso_utc,
        pct=pct,
        num=num,
        score=score,
        highlight=highlight,
        span_parts=span_parts,
        kind_name=lambda k: KIND_NAMES.get(k, k),
        verdict_name=lambda v: VERDICT_NAMES.get(v, v),
    )
    globals_: dict[str, Any] = {
        "KINDS": KINDS,
        "VERDICTS": VERDICTS,
        "KIND_NAMES": KIND_NAMES,
        "VERDICT_NAMES": VERDICT_NAMES,
        "VERDICT_KEYS": VERDICT_KEYS,
        "static_url": static_url,
        "version": __version__,
        "auth_enabled": settings.auth_enabled,
        "read_requires_token": settings.read_requires_token,
    }
    env.globals.update(globals_)
    return Jinja2Templates(env=env)
