"""End to end through the CLI: a large pair near by its pHash alone whose pixels contradict it
is not near (``large_phash_verify``), in an audit and in a dedup, while a re-encoded copy is.

Two 256-px tiles of different smooth grounds under the same bright corner are 4 pHash bits
apart (the corner is all the pHash sees), but each agrees with the other less than with itself
moved 2 px: verification scores -0.87 and -0.28. Before 0.5.0 the hash alone called them near
(``bench.dedup_photos``: 203 of the 476 false pHash pairs among 10,009 photo tiles)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.cli_audit import index_and_audit, near_matches
from helpers.photo_tiles import jpeg_copy
from PIL import Image, ImageDraw

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.demo import sample_photo

pytestmark = pytest.mark.slow
SIDE = 256
CANDIDATES = ("--threshold", "candidate_cosine=-1")  # the tiny model's cosines nominate nothing


def corner_tile(seed: int) -> Image.Image:
    """A smooth ground (8x8 noise upscaled) under an orange corner wedge: seeds differ only in
    the ground, which the pHash barely sees."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((SIDE // 32, SIDE // 32)) * 3 + 60
    ground = Image.fromarray(noise.clip(0, 255).astype(np.uint8), "L").resize(
        (SIDE, SIDE), Image.Resampling.BICUBIC
    )
    image = Image.merge("RGB", [ground, ground, ground.point(lambda v: min(255, v + 25))])
    ImageDraw.Draw(image).polygon(
        [(SIDE * 0.62, SIDE), (SIDE, SIDE * 0.62), (SIDE, SIDE)], fill=(235, 110, 60)
    )
    return image


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hash-contradicted")
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    corner_tile(3).save(corpus / "corner.png")
    sample_photo("astronaut").resize((256, 256)).save(corpus / "astronaut.png")
    corner_tile(10).save(split / "lookalike.png")
    jpeg_copy(corner_tile(3), 60).save(split / "copy.png")
    return root


def test_a_lookalike_under_the_same_corner_is_not_near_but_a_copy_is(
    folders: Path, tiny_model_spec: str
) -> None:
    report = index_and_audit(
        folders / "corpus", folders / "split", folders / "home", tiny_model_spec
    )
    assert near_matches(report, "lookalike.png") == {}
    near = near_matches(report, "copy.png")
    assert set(near) == {"corner.png"}
    assert "phash" in near["corner.png"]["evidence"]["near_rules"]
    assert report["thresholds"]["large_phash_verify"] == 0.0


def test_the_rule_as_before_calls_the_lookalike_near(folders: Path, tiny_model_spec: str) -> None:
    """With the floor at -1 (the rule before 0.5.0) the same audit calls the look-alike near on
    its hash alone, its verification score in the evidence below 0."""
    report = index_and_audit(
        folders / "corpus",
        folders / "split",
        folders / "home-before",
        tiny_model_spec,
        thresholds=["large_phash_verify=-1"],
    )
    near = near_matches(report, "lookalike.png")
    assert set(near) == {"corner.png"}
    evidence = near["corner.png"]["evidence"]
    assert evidence["phash_hamming"] <= 8
    assert evidence["verify_score"] < 0.0
    assert evidence["near_rules"] == ["phash"]


def test_a_dedup_keeps_the_copy_and_leaves_the_lookalike_out(
    folders: Path, tiny_model_spec: str, tmp_path: Path
) -> None:
    every = tmp_path / "all"
    every.mkdir()
    for folder in ("corpus", "split"):
        for path in (folders / folder).iterdir():
            Image.open(path).save(every / f"{folder}_{path.name}")
    home, out = tmp_path / "home", tmp_path / "dedup.json"
    runner = CliRunner()
    indexed = runner.invoke(
        cli, ["index", str(every), "--corpus", "d", "--home", str(home), "--model", tiny_model_spec]
    )
    assert indexed.exit_code == 0, indexed.output
    deduped = runner.invoke(
        cli,
        ["dedup", "--corpus", "d", "--home", str(home), "--json", str(out), *CANDIDATES],
    )
    assert deduped.exit_code == 0, deduped.output
    clusters = [
        sorted(m["key"] for m in c["members"]) for c in json.loads(out.read_text())["clusters"]
    ]
    assert clusters == [["corpus_corner.png", "split_copy.png"]]
