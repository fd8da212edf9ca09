"""Acting on an audit: the corpus blocklist (decontamination) and the clean split.

*Corpus blocklist*: the corpus items matched by the split at the failing tiers -- the items
to remove from a corpus before training so the test split is not in it (as large-model
papers decontaminate against their evaluation sets). A match reviewed ``not_duplicate`` (or
suppressed by the baseline) does not put its item on the list; a match reviewed
``duplicate`` always does, whatever its tier. Rows: ``corpus, key, url, shard``.

*Clean split*: the readable test items with no counted match at the failing tiers -- the
subset that can be evaluated on without leakage (as ciFAIR did for CIFAR). Unreadable
items are never clean: they were not audited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.output_files import write_table, write_text
from splitaudit.indexer.reporting.formats import Gated, ReportInput
from splitaudit.indexer.reporting.models import GateView, ReportMatch, as_report

BLOCKLIST_COLUMNS = ("corpus", "key", "url", "shard")
CLEAN_COLUMNS = ("key", "path", "label")
BLOCKLIST_FORMATS = (".txt", ".csv", ".parquet")
CLEAN_FORMATS = (".txt", ".csv")


def _reviewed_duplicate(match: ReportMatch) -> bool:
    return match.review is not None and match.review.verdict == "duplicate"


def blocklist_rows(
    report: ReportInput, fail_on: Iterable[str], *, gate: GateView | None = None
) -> list[dict[str, Any]]:
    """One row per corpus item to exclude (first seen order; each item once)."""
    tiers = set(fail_on)
    view = Gated(as_report(report), gate)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for item in view.report.items:
        for i, m in enumerate(item.matches):
            if m.corpus_key is None:
                continue  # a self label-leak names no corpus item
            counted = view.suppressed_by(item, i) is None
            if _reviewed_duplicate(m) or (m.kind in tiers and counted):
                key = (str(m.corpus), m.corpus_key)
                out.setdefault(
                    key, {"corpus": key[0], "key": key[1], "url": m.url, "shard": m.shard}
                )
    return list(out.values())


def clean_split_rows(
    report: ReportInput,
    fail_on: Iterable[str],
    *,
    split_root: Path | None = None,
    gate: GateView | None = None,
) -> list[dict[str, Any]]:
    """The test items with no counted match at the failing tiers: key, path, label.

    ``path`` is the image's path when the split is a folder (``split_root`` / key), else the key.
    """
    tiers = set(fail_on)
    view = Gated(as_report(report), gate)
    rows = []
    for item in view.report.items:
        if any(m.kind in tiers for m in view.counted(item)):
            continue
        key = item.key
        path = (
            str((split_root / key).resolve())
            if split_root is not None and split_root.is_dir()
            else key
        )
        rows.append({"key": key, "path": path, "label": item.label})
    return rows


def render_keys(rows: Iterable[Mapping[str, Any]]) -> str:
    """One key per line."""
    return "".join(f"{r['key']}\n" for r in rows)


def write_blocklist(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """``.txt`` keys (``corpus/key`` when several corpora), or ``.csv`` / ``.parquet`` rows."""
    suffix = _suffix(path, BLOCKLIST_FORMATS, "--corpus-blocklist")
    if suffix == ".txt":
        several = len({r["corpus"] for r in rows}) > 1
        write_text(
            path,
            "".join(f"{r['corpus']}/{r['key']}\n" if several else f"{r['key']}\n" for r in rows),
        )
    else:
        write_table(path, rows, BLOCKLIST_COLUMNS)


def write_clean_split(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """``.txt`` keys, or a ``.csv`` manifest (``key, path, label``) that ``splitaudit`` reads back as a split."""
    if _suffix(path, CLEAN_FORMATS, "--clean-split") == ".txt":
        write_text(path, render_keys(rows))
    else:
        write_table(path, rows, CLEAN_COLUMNS)


def _suffix(path: Path, allowed: Sequence[str], option: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in allowed:
        raise UsageError(f"{option} {path}: use a file ending in {', '.join(allowed)}")
    return suffix


def write_decontamination(
    report: ReportInput,
    fail_on: Iterable[str],
    *,
    split: Path,
    blocklists: Sequence[Path] = (),
    clean_splits: Sequence[Path] = (),
    gate: GateView | None = None,
) -> None:
    """Write each requested blocklist and clean-split file for a report and the gate's verdict."""
    tiers = tuple(fail_on)
    for path in blocklists:
        write_blocklist(path, blocklist_rows(report, tiers, gate=gate))
    for path in clean_splits:
        write_clean_split(path, clean_split_rows(report, tiers, split_root=split, gate=gate))
