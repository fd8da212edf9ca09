"""``bench.screen_photos`` scores what it measures: its screens' geometry and its tally."""

from __future__ import annotations

import numpy as np

from bench.screen_photos import screen_quad, tally


def test_a_screen_turned_by_a_yaw_shows_its_far_side_shorter() -> None:
    flat = screen_quad(400, 250, 0.0, 0.0)
    assert np.allclose(flat, [[-200, -125], [200, -125], [200, 125], [-200, 125]], atol=1e-3)
    turned = screen_quad(400, 250, 30.0, 0.0)  # the left side turns away from the camera
    left, right = turned[3, 1] - turned[0, 1], turned[2, 1] - turned[1, 1]
    assert 0.6 < left / right < 0.75


def _item(key: str, *near: str) -> dict:
    return {"key": key, "matches": [{"kind": "near", "corpus_key": k} for k in near]}


def test_the_tally_counts_own_photo_matches_by_share_and_yaw() -> None:
    report = {
        "items": [
            _item("screen/a-s35-y-5-p2-0.jpg", "a.jpg"),
            _item("screen/b-s35-y22-p-3-1.jpg", "filler-03.jpg"),  # another image: a miss
            _item("screen/c-s70-y12-p0-2.jpg"),
            _item("unrelated/d.jpg", "a.jpg"),  # a held-out photo matched: a false positive
            _item("unrelated/e.jpg"),
        ]
    }
    found = tally(report)
    assert found["recall"] == {"found": 1, "of": 3, "recall": 0.333}
    assert found["by_share"][35] == {"found": 1, "of": 2, "recall": 0.5}
    assert found["by_share"][70]["found"] == 0
    assert found["by_yaw"]["0-10"]["found"] == 1 and found["by_yaw"]["20-90"]["of"] == 1
    assert found["false_positives"] == ["unrelated/d.jpg"] and found["negatives"] == 2
    assert found["missed"] == ["screen/b-s35-y22-p-3-1.jpg", "screen/c-s70-y12-p0-2.jpg"]
