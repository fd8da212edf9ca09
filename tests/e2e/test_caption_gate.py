"""End to end through the CLI: a test caption copied into a corpus caption (on a different image)
fails ``--fail-on caption`` with the shared span in the JUnit message; boilerplate alone passes."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import photo

LEAKED = "Two children flying a yellow kite over the dunes of a windy beach in late autumn"


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "splitaudit.indexer.cli.main", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _split(folder: Path, rows: list[tuple[str, str]], seed: int) -> Path:
    folder.mkdir()
    with open(folder / "manifest.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["path", "caption"])
        for n, (name, caption) in enumerate(rows):
            photo(seed + n).save(folder / name, quality=90)  # unrelated photos: no image match
            writer.writerow([name, caption])
    return folder / "manifest.csv"


@pytest.mark.slow
def test_caption_copy_fails_the_gate_and_boilerplate_passes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    captions = [
        "Image may contain: 1 person, outdoor, stock photo",
        LEAKED,
        "A fisherman mending blue nets on a wooden pier beside three moored boats",
    ]
    for i, text in enumerate(captions):
        photo(i).save(corpus / f"img{i}.jpg", quality=90)
        (corpus / f"img{i}.txt").write_text(text, encoding="utf-8")
    home = tmp_path / "home"
    done = _cli("index", str(corpus), "--corpus", "web", "--no-embed", home=home)
    assert done.returncode == 0, done.stderr

    leaky = _split(
        tmp_path / "leaky",
        [("a.jpg", json.dumps(["a dog on a sofa", LEAKED.lower().rstrip(".") + "!"]))],
        seed=200,
    )
    junit = tmp_path / "leak.xml"
    done = _cli(
        "audit", str(leaky), "--corpus", "web", "--fail-on", "caption",
        "--junit", str(junit), "--json", str(tmp_path / "leak.json"), home=home,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert failure.get("type") == "caption"
    assert "caption copy of web:img1.jpg" in (failure.get("message") or "")
    assert 'shared "two children flying a yellow kite' in (failure.get("message") or "")
    report = json.loads((tmp_path / "leak.json").read_text())
    assert report["summary"]["by_kind"]["caption"] == 1

    boiler = _split(
        tmp_path / "boiler", [("b.jpg", "Image may contain: 1 person, outdoor")], seed=300
    )
    done = _cli("audit", str(boiler), "--corpus", "web", "--fail-on", "caption", home=home)
    assert done.returncode == 0, done.stdout + done.stderr
