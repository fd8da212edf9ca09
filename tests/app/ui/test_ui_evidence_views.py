"""The pair view shows what a match rests on: an inset boxed on the *test* image, the content check
and overlay-discarded keypoints of a geometric match, and both captions of a caption match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ui_support import new_home, parse, seed, ui_client

from splitaudit.app.ui.templating import span_parts
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Match, SplitItem
from splitaudit.indexer.workspace import Workspace

INSET = {
    "inliers": 42,
    "scale": 0.4,
    "angle": 0.0,
    "box": [0.0, 0.0, 1.0, 1.0],
    "test_box": [0.1, 0.2, 0.5, 0.6],
    "inset": True,
    "content": {"agreement": 0.81, "cells": 37, "region": [0.05, 0.1, 0.95, 0.9]},
}


def _set(home: Path, match_id: int, **fields: Any) -> None:
    ws = Workspace.open(home, migrate=False)
    try:
        with transaction(ws.sessions) as s:
            match = s.get(Match, match_id)
            assert match is not None
            for name, value in fields.items():
                setattr(match, name, value)
            split_item = s.get(SplitItem, match.split_item_id)
            assert split_item is not None
            split_item.width, split_item.height = 500, 300
    finally:
        ws.close()


def test_an_inset_is_boxed_on_the_test_image_with_the_content_check(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    _set(home, s.matches["near"], evidence={"geometry": INSET, "near_rules": ["geometry"]})
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['near']}")
    assert page.status_code == 200
    doc = parse(page.text)
    rect = doc.by_id("test-region-box").one("rect")
    assert float(rect.attrs["x"]) == pytest.approx(50.0)
    assert float(rect.attrs["y"]) == pytest.approx(60.0)
    assert float(rect.attrs["width"]) == pytest.approx(200.0)
    assert 'id="region-box"' not in page.text  # not boxed on the corpus image
    assert "inside" in doc.by_id("inset-evidence").text
    content = doc.by_id("content-evidence").text
    assert "81%" in content and "37 textured cells" in content


def test_overlay_discarded_keypoints_are_named(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    geometry = dict(
        INSET, inset=False, discarded={"inliers": 23, "reason": "overlay: only the mark"}
    )
    _set(home, s.matches["near"], evidence={"geometry": geometry, "cosine": 0.9})
    with ui_client(home) as client:
        doc = parse(client.get(f"/ui/matches/{s.matches['near']}").text)
    line = doc.by_id("discarded-evidence").text
    assert "23 keypoint matches" in line and "overlay: only the mark" in line


def test_a_refused_verification_is_named_with_its_whole_agreement(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    refused = {"verify_score": 0.7421, "whole_agreement": 0.31, "reason": "overlay: ..."}
    _set(home, s.matches["near"], evidence={"cosine": 0.71, "verify_refused": refused})
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['near']}").text
    line = parse(page).by_id("verify-refused-evidence").text
    assert "0.742" in line and "not counted" in line and "31%" in line
    assert "verify_refused:" not in page  # said once, as a sentence


def test_an_unconfirmed_turned_hash_is_named_as_not_counted(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    turned = {"phash_hamming": 8, "orientation": "rot90"}
    _set(
        home,
        s.matches["near"],
        evidence={"cosine": 0.6, "verify_score": 0.91, "unconfirmed_turned_phash": turned},
    )
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['near']}").text
    line = parse(page).by_id("unconfirmed-turn-evidence").text
    assert "8 of 64 bits" in line and "rot90" in line and "not counted" in line
    assert "unconfirmed_turned_phash:" not in page  # said once, as a sentence


def test_a_caption_match_shows_both_captions_with_the_shared_span(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    s = seed(home, tmp_path / "files")
    evidence = {
        "jaccard": 0.72,
        "exact": False,
        "shared_span": "two children flying a yellow kite",
        "test_caption": "Two children flying a yellow kite at dusk",
        "corpus_caption": "Photo: two children, flying a yellow kite over dunes",
    }
    _set(home, s.matches["semantic"], kind="caption", evidence=evidence, cosine=None)
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['semantic']}")
    assert page.status_code == 200
    box = parse(page.text).by_id("caption-evidence")
    marks = [m.text for m in box.find_all("mark")]
    assert marks == ["Two children flying a yellow kite", "two children, flying a yellow kite"]
    assert "near copy" in box.text and "0.720" in box.text


def test_span_parts_ignores_case_and_punctuation_and_never_loses_text() -> None:
    text = "A red bus, crossing the bridge!"
    assert span_parts(text, "red bus crossing") == ("A ", "red bus, crossing", " the bridge!")
    assert span_parts(text, "green tram") == (text, "", "")
    assert span_parts(None, "x") == ("", "", "")
