"""Progress that survives redirection: periodic lines in a log when stderr is not a terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import photo
from helpers.hf_layout import HFRows, jpeg, write_parquet

from splitaudit.indexer.pipeline.progress_log import ProgressLog, format_duration

LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ indexing ref: (\d+)/8 img, [\d.]+ img/s, \d+s elapsed"
    r"(, ETA \d+s)?$"
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_once_per_interval_with_rate_and_eta() -> None:
    clock, lines = FakeClock(), []
    log = ProgressLog("indexing x", emit=lines.append, total=1000, interval_s=10, clock=clock)
    log.advance(100)
    clock.now += 5
    log.advance(100)
    assert lines == []  # not yet 10 s
    clock.now += 5
    log.advance(50)
    assert lines == ["indexing x: 250/1,000 img, 25.0 img/s, 10s elapsed, ETA 30s"]
    clock.now += 4
    log.advance(1)
    assert len(lines) == 1


def test_fractional_progress_extrapolates_the_eta() -> None:
    clock, lines = FakeClock(), []
    log = ProgressLog("auditing", emit=lines.append, interval_s=10, clock=clock)
    clock.now += 30
    log.set_fraction(0.25, "read 120 split images")
    assert lines == ["auditing: 25%, read 120 split images, 30s elapsed, ETA 1m30s"]
    clock.now += 3600
    log.finish()
    assert len(lines) == 1  # nothing moved since the last line: no repeat
    log.set_fraction(0.5, "matching")
    assert len(lines) == 2 and lines[-1] == "auditing: 50%, matching, 1h00m elapsed, ETA 1h00m"
    log.set_fraction(1.0, "done")
    log.finish()
    assert lines[-1] == "auditing: 100%, done, 1h00m elapsed"
    assert format_duration(59.6) == "1m00s"


def _index(tmp_path: Path, *extra: str, source: Path | None = None) -> str:
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    for seed in range(8):
        photo(seed, (64, 48)).save(corpus / f"img{seed}.png")
    source = source or corpus
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITAUDIT_")}
    # The slowed source: each batch of one image takes 0.3 s.
    env.update(
        HF_HUB_OFFLINE="1", SPLITAUDIT_TEST_BATCH_DELAY="0.3", SPLITAUDIT_PROGRESS_INTERVAL="0.5"
    )
    log = tmp_path / "stderr.log"
    with open(log, "w") as fh:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "splitaudit.indexer.cli.main",
                "index",
                str(source),
                "--corpus",
                "ref",
                "--home",
                str(tmp_path / "home"),
                "--no-embed",
                "--batch-size",
                "1",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=fh,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, log.read_text()
    assert "indexed 8" in done.stdout
    return log.read_text()


@pytest.mark.slow
def test_index_logs_periodic_lines_when_stderr_is_a_file(tmp_path: Path) -> None:
    lines = [line for line in _index(tmp_path).splitlines() if "indexing ref" in line]
    assert len(lines) >= 3, lines
    assert all(LINE.match(line) for line in lines), lines
    counts = [int(LINE.match(line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert counts == sorted(counts) and counts[-1] == 8
    assert any("ETA" in line for line in lines[:-1])  # the folder's image count gives the total
    assert "\r" not in "".join(lines)  # no progress bar redraws in a log


def _parquet_dataset(tmp_path: Path) -> Path:
    rows = HFRows(
        images=[jpeg(photo(seed, (64, 48))) for seed in range(8)],
        labels=[seed % 2 for seed in range(8)],
        captions=[f"picture {seed}" for seed in range(8)],
        names=("cat", "dog"),
    )
    write_parquet(tmp_path / "hf" / "data" / "test-00000-of-00001.parquet", rows)
    return tmp_path / "hf"


def _csv_manifest(tmp_path: Path) -> Path:
    lines = ["path,label", *(f"corpus/img{seed}.png,cat" for seed in range(8))]
    (tmp_path / "manifest.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "manifest.csv"


@pytest.mark.slow
@pytest.mark.parametrize("make_source", [_parquet_dataset, _csv_manifest])
def test_parquet_and_manifest_lines_show_the_total_and_eta(
    tmp_path: Path, make_source: Callable[[Path], Path]
) -> None:
    lines = [
        line
        for line in _index(tmp_path, source=make_source(tmp_path)).splitlines()
        if "indexing ref" in line
    ]
    assert len(lines) >= 3, lines
    assert all(LINE.match(line) for line in lines), lines  # every line says n/8
    assert any("ETA" in line for line in lines[:-1]), lines


@pytest.mark.slow
def test_quiet_silences_progress(tmp_path: Path) -> None:
    assert "indexing ref" not in _index(tmp_path, "--quiet")


def test_folder_totals_count_images_only(tmp_path: Path) -> None:
    from splitaudit.indexer.pipeline.progress_log import count_folder_images
    from splitaudit.indexer.sources.folder import FolderSource

    root = tmp_path / "corpus"
    (root / "cat").mkdir(parents=True)
    (root / ".hidden").mkdir()
    for name in ("cat/a.jpg", "cat/b.PNG", "cat/b.txt", "c.webp", ".hidden/x.jpg", "cat/.y.jpg"):
        (root / name).write_bytes(b"")
    assert count_folder_images([FolderSource(root)]) == 3
    assert count_folder_images([]) is None

    class Hinted:
        def __init__(self, n: int | None) -> None:
            self.n = n

        def count_hint(self) -> int | None:
            return self.n

    assert count_folder_images([FolderSource(root), Hinted(10)]) == 13
    assert count_folder_images([FolderSource(root), Hinted(None)]) is None
    assert count_folder_images([FolderSource(root), object()]) is None
