"""Baselines: reviewed false positives, kept in a JSON file so the gate can suppress them offline.

A baseline entry names a (test image content, corpus item) pair: the test image by its
SHA-256 (or pixel digest, which survives a metadata-only re-save), the corpus item by
corpus name + key (or its SHA-256). Content hashes, not keys, identify the test side,
so renaming or moving a test image keeps its entry valid.

An entry of a visual tier (exact, near, semantic) suppresses a match of any visual tier for
the same pair: the reviewer judged the two images not to be duplicates, and a threshold
change that moves the pair from *near* to *semantic* does not change that. A
``label_leak`` entry suppresses only ``label_leak`` matches.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import InputError, UsageError
from splitaudit.indexer.kinds import IMAGE_KINDS, MATCH_KINDS
from splitaudit.indexer.reporting.models import Report, ReportItem, ReportMatch, as_report

SCHEMA = "splitaudit.baseline/v1"
VISUAL_TIERS = frozenset(IMAGE_KINDS)
_KINDS = MATCH_KINDS


@dataclass(frozen=True)
class BaselineEntry:
    """One reviewed false positive: a test image content hash paired with a corpus item."""

    corpus: str | None
    kind: str
    test_sha256: str | None = None
    test_pixel_digest: str | None = None
    corpus_key: str | None = None
    corpus_sha256: str | None = None
    test_key: str | None = None  # informational: where the image was when it was reviewed
    note: str | None = None

    def __post_init__(self) -> None:
        """Refuse entries that could never match anything."""
        if not (self.test_sha256 or self.test_pixel_digest):
            raise UsageError("a baseline entry needs test_sha256 or test_pixel_digest")
        if self.kind not in _KINDS:
            raise UsageError(f"baseline entry kind {self.kind!r} is not one of {', '.join(_KINDS)}")

    def matches(self, item: ReportItem, match: ReportMatch) -> bool:
        """True when this entry covers ``match`` of report item ``item``."""
        same_test = bool(
            (self.test_sha256 and self.test_sha256 == item.sha256)
            or (self.test_pixel_digest and self.test_pixel_digest == item.pixel_digest)
        )
        if not same_test or self.corpus != match.corpus:
            return False
        kind = match.kind
        if kind != self.kind and not (kind in VISUAL_TIERS and self.kind in VISUAL_TIERS):
            return False
        if self.corpus_sha256 and self.corpus_sha256 == corpus_sha256_of(match):
            return True
        return self.corpus_key == match.corpus_key

    def describe(self) -> str:
        """A short human name, e.g. ``cats/1.jpg ~ laion:000123 (near)``."""
        test = self.test_key or (self.test_sha256 or self.test_pixel_digest or "")[:12]
        other = (
            f"{self.corpus}:{self.corpus_key}"
            if self.corpus_key
            else (self.corpus or "own metadata")
        )
        return f"{test} ~ {other} ({self.kind})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as written in the baseline file."""
        return {
            "test_sha256": self.test_sha256,
            "test_pixel_digest": self.test_pixel_digest,
            "test_key": self.test_key,
            "corpus": self.corpus,
            "corpus_key": self.corpus_key,
            "corpus_sha256": self.corpus_sha256,
            "kind": self.kind,
            "note": self.note,
        }


@dataclass(frozen=True)
class Baseline:
    """A set of baseline entries, and where they came from."""

    entries: tuple[BaselineEntry, ...] = ()
    source: str | None = None

    def find(self, item: ReportItem, match: ReportMatch) -> BaselineEntry | None:
        """The first entry covering ``match``, else None."""
        return next((e for e in self.entries if e.matches(item, match)), None)

    def to_dict(self, *, origin: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON document of a baseline file."""
        return {
            "schema": SCHEMA,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "origin": dict(origin or {}),
            "entries": [e.to_dict() for e in self.entries],
        }


def corpus_sha256_of(match: ReportMatch) -> str | None:
    """The corpus item's SHA-256 when the report carries it (a match's ``sha256`` is the corpus item's)."""
    extra = match.model_extra or {}
    value = extra.get("corpus_sha256") or match.sha256 or match.evidence.get("corpus_sha256")
    return value if isinstance(value, str) else None


def entry_from_match(
    item: ReportItem, match: ReportMatch, *, note: str | None = None
) -> BaselineEntry:
    """The baseline entry that suppresses ``match`` of report item ``item``."""
    return BaselineEntry(
        test_sha256=item.sha256,
        test_pixel_digest=item.pixel_digest,
        test_key=item.key,
        corpus=match.corpus,
        corpus_key=match.corpus_key,
        corpus_sha256=corpus_sha256_of(match),
        kind=str(match.kind),
        note=note,
    )


def baseline_from_report(report: Report | Mapping[str, Any]) -> Baseline:
    """Entries for every match of ``report`` whose current review verdict is ``not_duplicate``."""
    entries: list[BaselineEntry] = []
    seen: set[BaselineEntry] = set()
    for item in as_report(report).items:
        if not (item.sha256 or item.pixel_digest):
            continue
        for match in item.matches:
            if match.review is None or not match.review_suppressed:
                continue
            entry = entry_from_match(item, match, note=match.review.note)
            if entry not in seen:
                seen.add(entry)
                entries.append(entry)
    return Baseline(entries=tuple(entries))


def parse_baseline(data: Any, *, source: str) -> Baseline:
    """Validate a decoded baseline document; ``InputError`` says what is wrong."""
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
        raise InputError(
            f"{source}: not a splitaudit baseline (schema {found!r}, expected {SCHEMA!r}); "
            "write one with `splitaudit baseline export`"
        )
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise InputError(f"{source}: 'entries' must be a list")
    entries = []
    for i, raw in enumerate(raw_entries):
        if not isinstance(raw, Mapping):
            raise InputError(f"{source}: entry {i} is not an object")
        try:
            entries.append(
                BaselineEntry(
                    test_sha256=_opt_str(raw, "test_sha256"),
                    test_pixel_digest=_opt_str(raw, "test_pixel_digest"),
                    test_key=_opt_str(raw, "test_key"),
                    corpus=_opt_str(raw, "corpus"),
                    corpus_key=_opt_str(raw, "corpus_key"),
                    corpus_sha256=_opt_str(raw, "corpus_sha256"),
                    kind=str(raw.get("kind", "")),
                    note=_opt_str(raw, "note"),
                )
            )
        except UsageError as exc:
            raise InputError(f"{source}: entry {i}: {exc}") from exc
    return Baseline(entries=tuple(entries), source=source)


def _opt_str(raw: Mapping[str, Any], key: str) -> str | None:
    """An optional string field (numbers are accepted as text)."""
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise UsageError(f"field {key!r} must be a string, got {type(value).__name__}")


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline file (``splitaudit.baseline/v1``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError(
            f"baseline file {p} does not exist; create it with `splitaudit baseline export`"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read baseline file {p}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    return parse_baseline(data, source=str(p))


def write_baseline(
    path: str | os.PathLike[str], baseline: Baseline, *, origin: Mapping[str, Any] | None = None
) -> None:
    """Write ``baseline`` as pretty JSON (sorted entries, so diffs in review stay small)."""
    ordered = Baseline(
        entries=tuple(sorted(baseline.entries, key=_sort_key)), source=baseline.source
    )
    text = json.dumps(ordered.to_dict(origin=origin), indent=2, ensure_ascii=False) + "\n"
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write baseline file {path}: {exc.strerror or exc}") from exc


def merge_baselines(baselines: Iterable[Baseline]) -> Baseline:
    """One baseline holding the entries of all, without repeats."""
    seen: dict[BaselineEntry, None] = {}
    for b in baselines:
        for e in b.entries:
            seen.setdefault(e, None)
    return Baseline(entries=tuple(seen))


def _sort_key(e: BaselineEntry) -> tuple[str, ...]:
    """Stable order for written files."""
    return (e.test_key or "", e.corpus or "", e.corpus_key or "", e.kind, e.test_sha256 or "")
