"""The pair view draws the region a geometric match located on the corpus image."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_support import new_home, parse, seed, ui_client

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Item, Match
from splitaudit.indexer.workspace import Workspace

GEOMETRY = {"inliers": 31, "scale": 0.414, "angle": 10.0, "box": [0.25, 0.5, 0.75, 0.9]}


def _with_geometry(home: Path, match_id: int, item_id: int) -> None:
    ws = Workspace.open(home, migrate=False)
    try:
        with transaction(ws.sessions) as s:
            match = s.get(Match, match_id)
            assert match is not None
            match.evidence = {"cosine": 0.62, "geometry": GEOMETRY, "near_rules": ["geometry"]}
            item = s.get(Item, item_id)
            assert item is not None
            item.width, item.height = 400, 200
    finally:
        ws.close()


def test_pair_view_boxes_the_located_region_on_the_corpus_image(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    _with_geometry(home, s.matches["near"], s.items["near"])
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['near']}")
    assert page.status_code == 200
    doc = parse(page.text)
    svg = doc.by_id("region-box")
    assert svg.attrs["viewbox"] == "0 0 400 200"  # the parser lower-cases attribute names
    rect = svg.one("rect")
    assert float(rect.attrs["x"]) == pytest.approx(100.0)
    assert float(rect.attrs["y"]) == pytest.approx(100.0)
    assert float(rect.attrs["width"]) == pytest.approx(200.0)
    assert float(rect.attrs["height"]) == pytest.approx(80.0)
    line = doc.by_id("geometry-evidence").text
    assert "31 keypoint matches" in line and "25–75%" in line and "50–90%" in line
    assert "rotated 10.0°" in line
    assert "geometry" in doc.by_id("visual-evidence").text


def test_pair_view_without_a_geometric_match_draws_no_box(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['near']}")
    assert 'id="region-box"' not in page.text
