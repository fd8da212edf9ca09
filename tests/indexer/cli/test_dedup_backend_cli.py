"""``splitaudit dedup SOURCE...`` loads the model on ``--backend`` with the exports cached in
``--home`` (as ``splitaudit index`` does), not in its temporary workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import photo

from splitaudit.indexer.cli.main import cli


def test_dedup_of_a_folder_honours_backend_and_the_export_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_spec: str
) -> None:
    from splitaudit.indexer.embed import backends
    from splitaudit.indexer.embed.loader import load_embedder

    calls: list[dict[str, Any]] = []

    def on_backend(spec: str, **kw: Any) -> Any:
        calls.append({"spec": spec, **kw})
        return load_embedder(spec)

    monkeypatch.setattr(backends, "load_embedder_on_backend", on_backend)
    folder = tmp_path / "photos"
    folder.mkdir()
    for seed in range(3):
        photo(seed, (96, 72)).save(folder / f"p{seed}.jpg", quality=90)
    photo(0, (96, 72)).save(folder / "copy.png")
    home = tmp_path / "home"
    args = ["dedup", str(folder), "--home", str(home), "--model", tiny_model_spec]
    result = CliRunner().invoke(cli, [*args, "--backend", "torch", "-q"])
    assert result.exit_code == 0, result.output
    assert "1 duplicate clusters" in result.output
    assert [(c["spec"], c["backend"], c["cache_dir"]) for c in calls] == [
        (tiny_model_spec, "torch", home / "exports")
    ]
