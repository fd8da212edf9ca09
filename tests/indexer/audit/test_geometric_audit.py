"""End to end: a heavy crop + rotation of a corpus photo is near with its located region; another
region of the same photo is not."""

from __future__ import annotations

import pytest
from PIL import Image

from indexer.audit.formats import render_markdown
from indexer.audit.report import audit_report
from indexer.audit.service import create_audit, create_split, run_audit
from indexer.demo import sample_photo
from indexer.pipeline.index import index_sources
from indexer.sources.folder import FolderSource
from indexer.sources.open import open_split
from indexer.workspace import Workspace

# The tiny test model's cosines are not semantic; nominate every neighbour so that the
# geometric match -- not the embedding -- decides, as it does for a real model's candidates.
NOMINATE_ALL = {"candidate_cosine": -1.0}


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str) -> dict:
    """One audit, shared by the module's tests (they only read its report)."""
    from indexer.embed.loader import load_embedder

    tmp_path = tmp_path_factory.mktemp("geometric-audit")
    scene = sample_photo("astronaut")  # 512 x 512
    corpus = tmp_path / "corpus" / "all"
    corpus.mkdir(parents=True)
    scene.crop((0, 0, 256, 512)).save(corpus / "left_half.jpg", quality=92)
    for name in ("coffee", "rocket", "camera"):
        sample_photo(name).save(corpus / f"{name}.jpg", quality=92)
    ws = Workspace.open(tmp_path / "home")
    index_sources(
        ws,
        "c",
        [FolderSource(tmp_path / "corpus")],
        embedder=load_embedder(tiny_model_spec),
        model_spec=tiny_model_spec,
    )

    split = tmp_path / "split"
    split.mkdir()
    # 50% of the left half's side (a quarter of its area), rotated 10 degrees, re-encoded.
    crop = scene.crop((64, 200, 192, 328)).resize((256, 256), Image.Resampling.LANCZOS)
    crop.rotate(10, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(255, 255, 255)).save(
        split / "planted.jpg", quality=70
    )
    scene.crop((300, 180, 500, 380)).save(
        split / "sibling.jpg", quality=90
    )  # right half: no shared pixels
    split_id = create_split(ws, open_split(str(split)), name="s")
    audit_id = create_audit(ws, split_id=split_id, corpora=["c"], thresholds=NOMINATE_ALL)
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        return audit_report(s, audit_id)


def test_planted_crop_and_rotation_is_near_with_its_region(audited: dict) -> None:
    by_key = {it["key"]: it for it in audited["items"]}
    planted = by_key["planted.jpg"]
    assert planted["verdict"] == "near"
    top = planted["matches"][0]
    assert top["corpus_key"] == "all/left_half.jpg" and top["kind"] == "near"
    assert "geometry" in top["evidence"]["near_rules"]
    geometry = top["evidence"]["geometry"]
    assert geometry["angle"] == pytest.approx(10.0, abs=1.5)
    x0, y0, x1, y1 = geometry["box"]
    # The crop's centre (128, 264) of the 256 x 512 half, as fractions.
    assert ((x0 + x1) / 2, (y0 + y1) / 2) == pytest.approx((0.5, 264 / 512), abs=0.04)
    assert geometry["inliers"] >= audited["thresholds"]["geometry_inliers"]


def test_other_region_of_the_same_photo_is_not_near(audited: dict) -> None:
    by_key = {it["key"]: it for it in audited["items"]}
    assert all(m["kind"] != "near" for m in by_key["sibling.jpg"]["matches"])
    assert by_key["sibling.jpg"]["verdict"] in ("clean", "semantic")


def test_markdown_report_names_the_located_region(audited: dict) -> None:
    text = render_markdown(audited)
    line = next(row for row in text.splitlines() if "planted.jpg" in row)
    assert "region x" in line and "rotated 10" in line and "of the corpus image" in line
