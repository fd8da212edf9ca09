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
from splitaudit.indexer.gate.evaluate import is_review_suppressed

BLOCKLIST_COLUMNS = ("corpus", "key", "url", "shard")
CLEAN_COLUMNS = ("key", "path", "label")
BLOCKLIST_FORMATS = (".txt", ".csv", ".parquet")
CLEAN_FORMATS = (".txt", ".csv")


def _counted(match: Mapping[str, Any]) -> bool:
    return not is_review_suppressed(match) and not match.get("suppressed_by")


def _reviewed_duplicate(match: Mapping[str, Any]) -> bool:
    review = match.get("review")
    return isinstance(review, Mapping) and review.get("verdict") == "duplicate"


def blocklist_rows(report: Mapping[str, Any], fail_on: Iterable[str]) -> list[dict[str, Any]]:
    """One row per corpus item to exclude (first seen order; each item once)."""
    tiers = set(fail_on)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for item in report.get("items", []):
        for m in item.get("matches", []):
            if m.get("corpus_key") is None:
                continue  # a self label-leak names no corpus item
            if _reviewed_duplicate(m) or (m.get("kind") in tiers and _counted(m)):
                key = (str(m.get("corpus")), str(m["corpus_key"]))
                out.setdefault(
                    key,
                    {"corpus": key[0], "key": key[1], "url": m.get("url"), "shard": m.get("shard")},
                )
    return list(out.values())


def clean_split_rows(
    report: Mapping[str, Any], fail_on: Iterable[str], *, split_root: Path | None = None
) -> list[dict[str, Any]]:
    """The test items with no counted match at the failing tiers: key, path, label.

    ``path`` is the image's path when the split is a folder (``split_root`` / key), else the key.
    """
    tiers = set(fail_on)
    rows = []
    for item in report.get("items", []):
        if any(m.get("kind") in tiers and _counted(m) for m in item.get("matches", [])):
            continue
        key = str(item.get("key"))
        path = (
            str((split_root / key).resolve())
            if split_root is not None and split_root.is_dir()
            else key
        )
        rows.append({"key": key, "path": path, "label": item.get("label")})
    return rows


def render_keys(rows: Iterable[Mapping[str, Any]]) -> str:
    """One key per line."""
    return "".join(f"{r['key']}\n" for r in rows)


def write_blocklist(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """``.txt`` keys (``corpus/key`` when several corpora), or ``.csv`` / ``.parquet`` rows."""
    from splitaudit.indexer.dedup.outputs import write_table, write_text

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
    from splitaudit.indexer.dedup.outputs import write_table, write_text

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
    report: Mapping[str, Any],
    fail_on: Iterable[str],
    *,
    split: Path,
    blocklists: Sequence[Path] = (),
    clean_splits: Sequence[Path] = (),
) -> None:
    """Write each requested blocklist and clean-split file for a (gated) report."""
    tiers = tuple(fail_on)
    for path in blocklists:
        write_blocklist(path, blocklist_rows(report, tiers))
    for path in clean_splits:
        write_clean_split(path, clean_split_rows(report, tiers, split_root=split))
