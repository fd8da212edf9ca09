"""Evidence as readable lines, and the region box the HTML report draws."""

from __future__ import annotations

import re

from splitaudit.indexer.reporting.evidence_lines import evidence_lines, region_box
from splitaudit.indexer.reporting.html_report import render_html
from splitaudit.indexer.reporting.html_thumbs import EmbeddedImage

GEOMETRIC = {
    "phash_hamming": 22,
    "cosine": 0.91234,
    "geometry": {
        "box": [0.25, 0.1, 0.75, 0.6],
        "inliers": 41,
        "scale": 0.5,
        "angle": 3.0,
        "content": {"agreement": 0.83, "cells": 40, "region": [0.3, 0.1, 0.7, 0.6]},
        "discarded": {"inliers": 12, "reason": "they lie on a shared overlay"},
    },
    "near_rules": ["geometry"],
    "min_side": 240,
    "overlay": {"kind": "frame"},  # a key this module does not know: shown as it is
}


def test_each_piece_of_evidence_is_one_readable_line() -> None:
    lines = evidence_lines(GEOMETRIC)
    assert lines[0] == "pHash differs in 22 of 64 bits"
    assert "embedding cosine 0.912" in lines
    assert any(
        line.startswith("geometric match: 41 keypoint matches agree on one transform;")
        and "25%-75% across and 10%-60% down the corpus image" in line
        and "side 50% of it" in line
        for line in lines
    )
    assert any("agree in 83% of 40 textured cells" in line for line in lines)
    assert "12 keypoint matches discarded: they lie on a shared overlay" in lines
    assert "near because of: geometry" in lines
    assert 'overlay: {"kind": "frame"}' in lines
    assert evidence_lines({}) == [] and evidence_lines(None) == []


def test_a_shape_nomination_reads_as_one_line_not_as_a_raw_key() -> None:
    lines = evidence_lines({"shape_cosine": 0.9123, "verify_score": 0.97, "near_rules": ["verify"]})
    assert lines[0] == "thumbnail shape descriptor cosine 0.912 (among the test image's nearest)"
    assert not any(line.startswith("shape_cosine") for line in lines)


def test_region_box_is_on_the_corpus_image_for_a_crop_and_on_the_test_image_for_an_inset() -> None:
    assert region_box(GEOMETRIC, on_test=False) == (0.25, 0.1, 0.75, 0.6)
    assert region_box(GEOMETRIC, on_test=True) is None
    inset = {"geometry": {"inset": True, "box": [0, 0, 1, 1], "test_box": [0.1, 0.2, 0.5, 0.6]}}
    assert region_box(inset, on_test=True) == (0.1, 0.2, 0.5, 0.6)
    assert region_box(inset, on_test=False) is None
    assert region_box({"geometry": {"box": [0.5, 0.5, 0.2, 0.9]}}, on_test=False) is None
    assert region_box({"geometry": {"box": "nope"}}, on_test=False) is None


def test_html_report_lists_evidence_and_draws_the_region_on_the_corpus_image() -> None:
    report = {
        "items": [
            {
                "split_item_id": 1,
                "key": "crop.jpg",
                "verdict": "near",
                "matches": [
                    {
                        "id": 5,
                        "kind": "near",
                        "corpus": "web",
                        "corpus_key": "full.jpg",
                        "corpus_item_id": 7,
                        "hamming": 22,
                        "cosine": 0.91,
                        "score": 0.91,
                        "evidence": GEOMETRIC,
                    }
                ],
            }
        ]
    }
    thumb = EmbeddedImage(uri="data:image/png;base64,AAAA", reason=None)
    page = render_html(report, thumbnails={("split", 1): thumb, ("corpus", 7): thumb})
    assert '<ul class="evidence"><li>pHash differs in 22 of 64 bits</li>' in page
    assert '"box"' not in page and "{&quot;" not in page.split("overlay: ")[0]  # no raw JSON
    rects = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', page)
    assert rects == [("0.2500", "0.1000", "0.5000", "0.5000")]
    corpus_side = page.split('<div class="side">')[2]
    assert 'aria-label="where the test image lies"' in corpus_side


def test_a_content_cosine_is_said_as_the_content_region_alone() -> None:
    lines = evidence_lines({"cosine": 0.74, "content_cosine": 0.41})
    assert lines == [
        "embedding cosine 0.740",
        "content region alone (away from the overlay): embedding cosine 0.410",
    ]


def test_a_refused_verification_is_said_with_its_whole_agreement() -> None:
    refused = {"verify_score": 0.7421, "whole_agreement": 0.31, "reason": "overlay: ..."}
    lines = evidence_lines({"cosine": 0.71, "verify_refused": refused})
    assert lines == [
        "embedding cosine 0.710",
        "pixel verification score 0.742 not counted: compared whole, 31% of the textured cells "
        "agree (a shared overlay: frame, window chrome, caption bands)",
    ]


def test_a_fit_in_perspective_reads_as_one_line_not_as_a_raw_key() -> None:
    geometry = {"inliers": 90, "inset": True, "test_box": [0.2, 0.3, 0.7, 0.8]}
    lines = evidence_lines({"geometry": {**geometry, "perspective": True}})
    assert any(line.startswith("seen in perspective (a photo of a screen") for line in lines)
    assert not any(line.startswith("geometry perspective") for line in lines)
    assert not any("perspective" in line for line in evidence_lines({"geometry": geometry}))
