"""End to end through the CLI (``splitaudit index --no-embed`` + ``splitaudit audit --json``): a
32-px copy moved by 10% of its side, zoomed 1.2 and re-scraped, whose pHash is too far from its
source for the hash candidates, is near because its shape descriptor nominated the source
(issue 23); the neighbouring crop of the same photo and crops of other photos are not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.thumb_edits import rescraped, square_cut

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.features.perceptual import perceptual_hashes
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.store.shape_index import SHAPES_FILE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """Corpus: 60 look-alike 32-px crops of five photos and the source crop; a hash-only
    index, so the pHash searches and the shape search are the only ones that nominate."""
    root = tmp_path_factory.mktemp("shape-audit")
    corpus, split = root / "corpus", root / "split"
    corpus.mkdir()
    split.mkdir()
    photos = [sample_photo(n) for n in ("astronaut", "coffee", "rocket", "chelsea", "motorcycle")]
    rng = np.random.default_rng(0)
    for i in range(60):
        p = photos[i % 5]
        side = float(rng.uniform(60, 140))
        cx = float(rng.uniform(side / 2, p.width - side / 2))
        cy = float(rng.uniform(side / 2, p.height - side / 2))
        square_cut(p, cx, cy, side).save(corpus / f"d{i:02d}.png")
    astronaut = photos[0]
    source = square_cut(astronaut, 240, 380, 120)
    source.save(corpus / "source.png")
    copy = rescraped(square_cut(astronaut, 252, 372.8, 100))  # moved 10% / 6%, zoomed 1.2
    copy.save(split / "copy.png")
    rescraped(square_cut(astronaut, 360, 380, 120)).save(split / "neighbour.png")
    rescraped(square_cut(photos[2], 200, 300, 110)).save(split / "other_photo.png")
    far = bin(perceptual_hashes(copy).phash ^ perceptual_hashes(source).phash).count("1")
    assert far > DEFAULT_THRESHOLDS.candidate_hamming  # no hash search can nominate it
    home = root / "home"
    runner = CliRunner()
    common = ["--corpus", "c", "--home", str(home)]
    indexed = runner.invoke(cli, ["index", str(corpus), *common, "--no-embed"])
    assert indexed.exit_code == 0, indexed.output
    out = root / "report.json"
    audited = runner.invoke(cli, ["audit", str(split), *common, "--json", str(out)])
    assert audited.exit_code in (0, 1), audited.output
    return json.loads(out.read_text()), home


def _near(report: dict, key: str) -> dict[str, dict]:
    item = next(it for it in report["items"] if it["key"] == key)
    return {m["corpus_key"]: m for m in item["matches"] if m["kind"] in ("near", "exact")}


def test_a_copy_only_its_shape_nominates_is_near(audited: tuple[dict, Path]) -> None:
    report, home = audited
    near = _near(report, "copy.png")
    assert set(near) == {"source.png"}
    evidence = near["source.png"]["evidence"]
    assert evidence["shape_cosine"] > 0.8
    assert evidence["verify_score"] >= DEFAULT_THRESHOLDS.verify_score
    assert evidence["near_rules"] == ["verify"]
    assert "phash_hamming" not in evidence  # no hash search found it
    assert list(home.rglob(SHAPES_FILE))  # the index keeps the thumbnails' descriptors


def test_the_neighbouring_crop_and_another_photo_are_not_near(audited: tuple[dict, Path]) -> None:
    report, _home = audited
    assert _near(report, "neighbour.png") == {}
    assert _near(report, "other_photo.png") == {}
