"""Helpers for the end-to-end audits through the CLI: index a corpus, audit a split with one
step of the library switched off for the run (the same audit with and without it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def index_corpus(corpus: Path, home: Path, name: str = "c") -> None:
    """``splitaudit index`` of ``corpus`` with the bundled model into ``home``."""
    from click.testing import CliRunner

    from splitaudit.indexer.cli.main import cli

    done = CliRunner().invoke(
        cli,
        [
            *("index", str(corpus), "--corpus", name, "--home", str(home)),
            *("--model", "efficientnet-lite0"),
        ],
    )
    assert done.exit_code == 0, done.output


def audit_report(
    split: Path,
    home: Path,
    out: Path,
    off: tuple[Any, str, Any] | list[tuple[Any, str, Any]] | None = None,
    name: str = "c",
) -> dict:
    """The JSON report of ``splitaudit audit`` of ``split`` (written to ``out``); ``off``:
    (module, attribute, replacement) patched in for this audit only (or a list of them)."""
    from click.testing import CliRunner

    from splitaudit.indexer.cli.main import cli

    patch = pytest.MonkeyPatch()
    for one in [off] if isinstance(off, tuple) else off or []:
        patch.setattr(*one)
    try:
        done = CliRunner().invoke(
            cli, ["audit", str(split), "--corpus", name, "--home", str(home), "--json", str(out)]
        )
    finally:
        patch.undo()
    assert done.exit_code in (0, 1), done.output  # 1: the gate failed, as it should
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def audit_folders(root: Path) -> tuple[Path, Path, Path]:
    """``root``'s corpus and split folders (made) and the workspace home to index into."""
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    return corpus, split, root / "home"


def only_near_geometry(report: dict, key: str, corpus_key: str) -> dict[str, Any]:
    """The geometry evidence of test image ``key``'s near match, asserting ``corpus_key`` is
    the one corpus image it is near."""
    from helpers.cli_audit import near_matches

    near = near_matches(report, key)
    assert set(near) == {corpus_key}, sorted(near)
    return near[corpus_key]["evidence"]["geometry"]  # type: ignore[no-any-return]


def paste_fitted(
    canvas: Any, photo: Any, fraction: float, at: tuple[float, float]
) -> tuple[float, float, float, float]:
    """``photo`` (PIL) fitted in ``fraction`` of ``canvas``'s width and height, pasted with its
    top-left at ``at`` (fractions of the canvas); its box on the canvas, as fractions."""
    from PIL import Image

    w, h = canvas.size
    scale = min(fraction * w / photo.width, fraction * h / photo.height)
    size = (round(photo.width * scale), round(photo.height * scale))
    x, y = round(at[0] * w), round(at[1] * h)
    canvas.paste(photo.resize(size, Image.Resampling.LANCZOS), (x, y))
    return (x / w, y / h, (x + size[0]) / w, (y + size[1]) / h)
