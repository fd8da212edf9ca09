"""``--workers N|auto``: parsing, and what auto resolves to."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import photo

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.cli.workers_option import (
    AUTO_CAP,
    WorkersType,
    resolve_workers,
    usable_cpus,
)


@pytest.mark.parametrize(("raw", "parsed"), [("auto", "auto"), ("1", 1), ("12", 12), (3, 3)])
def test_parses_counts_and_auto(raw: object, parsed: object) -> None:
    assert WorkersType().convert(raw, None, None) == parsed


@pytest.mark.parametrize("raw", ["0", "257", "-1", "many", "2.5"])
def test_refuses_anything_else(raw: str) -> None:
    with pytest.raises(click.BadParameter):
        WorkersType().convert(raw, None, None)


def test_auto_is_one_process_per_cpu_up_to_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_workers(5) == 5  # an explicit count is kept
    assert resolve_workers("auto") == min(usable_cpus(), AUTO_CAP)
    monkeypatch.setattr("splitaudit.indexer.cli.workers_option.usable_cpus", lambda: 3)
    assert resolve_workers("auto") == 3
    monkeypatch.setattr("splitaudit.indexer.cli.workers_option.usable_cpus", lambda: 96)
    assert resolve_workers("auto") == AUTO_CAP


def _photo_folder(tmp_path: Path, count: int) -> tuple[Path, str]:
    """A folder of ``count`` small JPEGs, and a home folder path."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(count):
        photo(i, (64, 48)).save(folder / f"{i}.jpg")
    return folder, str(tmp_path / "home")


def test_index_cli_takes_auto_and_refuses_zero(tmp_path: Path) -> None:
    folder, home = _photo_folder(tmp_path, 3)
    bad = CliRunner().invoke(cli, ["index", str(folder), "--corpus", "c", "--home", home,
                                   "--no-embed", "--workers", "0"])  # fmt: skip
    assert bad.exit_code == 2 and "--workers" in bad.output
    ok = CliRunner().invoke(cli, ["index", str(folder), "--corpus", "c", "--home", home,
                                  "--no-embed"])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert "indexed 3," in ok.output


def test_audit_cli_takes_auto_by_default_and_refuses_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, home = _photo_folder(tmp_path, 4)
    indexed = CliRunner().invoke(cli, ["index", str(folder), "--corpus", "c", "--home", home,
                                       "--no-embed"])  # fmt: skip
    assert indexed.exit_code == 0, indexed.output
    bad = CliRunner().invoke(cli, ["audit", str(folder), "--corpus", "c", "--home", home,
                                   "--workers", "0"])  # fmt: skip
    assert bad.exit_code == 2 and "--workers" in bad.output
    seen: list[int] = []
    import splitaudit.indexer.audit.ingest as ingest

    real = ingest.Extractor

    def recording(*, workers: int, keep_image: bool) -> object:
        seen.append(workers)
        return real(workers=workers, keep_image=keep_image)

    monkeypatch.setattr(ingest, "Extractor", recording)
    monkeypatch.setattr("splitaudit.indexer.cli.workers_option.usable_cpus", lambda: 2)
    ok = CliRunner().invoke(cli, ["audit", str(folder), "--corpus", "c", "--home", home])
    # every test image is an exact copy of an indexed one: the gate fails (exit 1), nothing broke
    assert ok.exit_code == 1, ok.output
    assert "exact 4" in ok.output
    assert seen == [2]  # auto: one process per usable CPU
