"""The Markdown summary's policy line: no "max rate None" when only a count limit is in force."""

from __future__ import annotations

from pathlib import Path

from conftest import photo

import splitaudit
from splitaudit.indexer.reporting.formats import render_markdown


def _result(tmp_path: Path, **policy: object) -> str:
    corpus, split = tmp_path / "corpus", tmp_path / "split"
    corpus.mkdir(exist_ok=True)
    split.mkdir(exist_ok=True)
    photo(0, (96, 72)).save(corpus / "0.png")
    photo(0, (96, 72)).save(split / "a.png")
    photo(9, (96, 72)).save(split / "b.png")
    home = tmp_path / "home"
    if not home.exists():
        splitaudit.index(corpus, corpus="c", home=home, embed=False, progress=False)
    result = splitaudit.audit(split, corpus="c", home=home, progress=False, **policy)  # type: ignore[arg-type]
    return render_markdown(result.to_dict())


def test_count_only_policy_prints_no_rate(tmp_path: Path) -> None:
    text = _result(tmp_path, max_count=1)
    line = next(ln for ln in text.splitlines() if ln.startswith("Policy: "))
    assert "None" not in text
    assert line.startswith("Policy: fail on exact, near, max count 1")
    rated = _result(tmp_path, max_rate=0.25)
    assert "max rate 0.25" in rated and "None" not in rated
