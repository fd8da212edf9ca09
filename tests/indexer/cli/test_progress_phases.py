"""Every long phase reports progress: the audit's matching (verification) phase, dedup; --quiet silences it."""

from __future__ import annotations

import itertools
from pathlib import Path

from click.testing import CliRunner
from conftest import photo

import splitaudit
from splitaudit.indexer.audit.service import run_audit, submit_audit
from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.sources.open import split_location
from splitaudit.indexer.workspace import Workspace


def _corpus_and_edited_split(root: Path) -> tuple[Path, Path]:
    """6 corpus photos; a split of 3 cropped, resized JPEG-60 copies (candidates to verify)."""
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    for seed in range(6):
        photo(seed, (320, 240)).save(corpus / f"{seed}.png")
    for seed in range(3):
        edited = photo(seed, (320, 240)).crop((20, 15, 300, 225)).resize((200, 150))
        edited.save(split / f"{seed}.jpg", quality=60)
    return corpus, split


def test_audit_reports_the_verification_phase(tmp_path: Path) -> None:
    corpus, split = _corpus_and_edited_split(tmp_path)
    home = tmp_path / "home"
    splitaudit.index(corpus, corpus="c", home=home, embed=False, progress=False)
    ws = Workspace.open(home)
    try:
        audit_id = submit_audit(ws, split_uri=split_location(split), name="s", corpora=["c"])
        seen: list[tuple[float, str]] = []
        run_audit(ws, audit_id, progress=lambda f, m: seen.append((f, m)))
    finally:
        ws.close()
    verifying = [m for _f, m in seen if m.startswith("verifying against c: ")]
    assert verifying, seen
    assert verifying[0].endswith("images with candidates")
    fractions = [f for f, _m in seen]
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(fractions))  # onwards
    assert all(0.6 <= f <= 0.9 for f, m in seen if m.startswith("verifying"))


def _dedup(home: Path, *flags: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli,
        ["dedup", "--corpus", "c", "--home", str(home), *flags],
        env={"SPLITAUDIT_PROGRESS_INTERVAL": "0.01"},
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout, result.stderr


def test_dedup_writes_progress_lines_when_piped_and_quiet_silences_them(tmp_path: Path) -> None:
    corpus, _split = _corpus_and_edited_split(tmp_path)
    home = tmp_path / "home"
    splitaudit.index(corpus, corpus="c", home=home, embed=False, progress=False)

    code, out, err = _dedup(home)
    assert code == 0, err
    lines = [line for line in err.splitlines() if " dedup c: " in line]
    assert lines, err  # stderr is not a terminal here: periodic lines, not a bar
    assert any("%" in line and "elapsed" in line for line in lines)
    assert "6 items" in out

    code, out, err = _dedup(home, "--quiet")
    assert code == 0
    assert err == ""
    assert "6 items" in out
