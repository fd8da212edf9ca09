"""End to end: a heavy crop + rotation of a corpus photo is near with its located region; another
region of the same photo is not."""

from __future__ import annotations

import pytest
from helpers.geometric_case import crop_rotation_case

from splitaudit.indexer.audit.service import create_audit, run_audit
from splitaudit.indexer.reporting.formats import render_markdown
from splitaudit.indexer.reporting.report import audit_report

# The tiny test model's cosines are not semantic; nominate every neighbour so that the
# geometric match -- not the embedding -- decides, as it does for a real model's candidates.
NOMINATE_ALL = {"candidate_cosine": -1.0}


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str) -> dict:
    """One audit, shared by the module's tests (they only read its report)."""
    ws, split_id = crop_rotation_case(tmp_path_factory.mktemp("geometric-audit"), tiny_model_spec)
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
