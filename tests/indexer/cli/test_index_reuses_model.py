"""``splitaudit index`` on an existing corpus embeds with the corpus's own model (as ``audit`` does)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.db.models import Corpus
from splitaudit.indexer.workspace import Workspace


def _folder(root: Path, seeds: range) -> Path:
    root.mkdir(parents=True)
    for seed in seeds:
        photo(seed, (64, 48)).save(root / f"{seed}.png")
    return root


def test_second_index_run_reuses_the_corpus_model(tmp_path: Path, tiny_model_spec: str) -> None:
    home = tmp_path / "home"
    runner = CliRunner()
    env = {"HF_HUB_OFFLINE": "1", "SPLITAUDIT_HOME": None, "SPLITAUDIT_DATABASE_URL": None}
    first = runner.invoke(
        cli,
        [
            "index",
            str(_folder(tmp_path / "a", range(3))),
            "--corpus",
            "c",
            "--home",
            str(home),
            "--model",
            tiny_model_spec,
            "--backend",
            "torch",
            "-q",
        ],
        env=env,
    )
    assert first.exit_code == 0, first.output
    # No --model: before, the default ViT-B-32 was tried (no hub here: exit 2).
    second = runner.invoke(
        cli,
        [
            "index",
            str(_folder(tmp_path / "b", range(3, 5))),
            "--corpus",
            "c",
            "--home",
            str(home),
            "--backend",
            "torch",
            "-q",
        ],
        env=env,
    )
    assert second.exit_code == 0, second.output
    assert "indexed 2" in second.output
    ws = Workspace.open(home)
    try:
        with ws.sessions() as s:
            assert s.scalar(select(Corpus.model_spec).where(Corpus.name == "c")) == tiny_model_spec
    finally:
        ws.close()
    new = runner.invoke(
        cli,
        [
            "index",
            str(tmp_path / "b"),
            "--corpus",
            "other",
            "--home",
            str(home),
            "--backend",
            "torch",
            "-q",
        ],
        env=env,
    )
    assert new.exit_code == 2  # a new corpus still defaults to ViT-B-32 (weights not cached here)
    assert "ViT-B-32" in new.output
