"""Index a corpus folder and audit a split folder through the CLI; return the JSON report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from splitaudit.indexer.cli.main import cli


def index_and_audit(
    corpus: Path, split: Path, home: Path, model_spec: str, thresholds: Sequence[str] = ()
) -> dict[str, Any]:
    """``splitaudit index CORPUS`` with ``model_spec``, then ``splitaudit audit SPLIT --json``
    (``thresholds``: more ``NAME=VALUE`` overrides).

    The tiny test model's cosines are not semantic, so the audit nominates every neighbour
    (``candidate_cosine=-1``): the hashes, the verifier and the geometric match decide, as they
    do for a real model's candidates.
    """
    runner = CliRunner()
    indexed = runner.invoke(
        cli, ["index", str(corpus), "--corpus", "c", "--home", str(home), "--model", model_spec]
    )
    assert indexed.exit_code == 0, indexed.output
    out = home.parent / "report.json"
    audit = ["audit", str(split), "--corpus", "c", "--home", str(home), "--json", str(out)]
    overrides = ["candidate_cosine=-1", *thresholds]
    audited = runner.invoke(cli, [*audit, *(a for o in overrides for a in ("--threshold", o))])
    assert audited.exit_code in (0, 1), audited.output
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def near_matches(report: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """The near and exact matches of test image ``key`` in an audit report, by corpus key."""
    item = next(it for it in report["items"] if it["key"] == key)
    return {m["corpus_key"]: m for m in item["matches"] if m["kind"] in ("near", "exact")}
