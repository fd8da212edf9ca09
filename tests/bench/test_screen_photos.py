"""``bench.screen_photos`` scores what it measures: its screens' geometry and its tally."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

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


def test_shot_side_reduces_every_test_image_and_keeps_the_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import distractors, screen_photos
    from bench.accuracy import photos

    rng = np.random.default_rng(0)

    def image(w: int, h: int) -> Image.Image:
        return Image.fromarray(rng.integers(0, 255, (h, w, 3), np.uint8))

    fake = [photos.Photo(f"p{k}", "test", image(160, 120)) for k in range(6)]
    rooms = [(f"r{k}", image(320, 240)) for k in range(screen_photos.FILLER + 2)]
    monkeypatch.setattr(photos, "collect_photos", lambda: fake)
    monkeypatch.setattr(distractors, "pool_images", lambda avoid: iter(rooms))
    screen_photos.build(tmp_path, max_yaw=20.0, copies=1, seed=0, shot_side=300)
    split = sorted((tmp_path / "split").rglob("*.jpg"))
    assert len(split) == 6  # four indexed photos on screens, two held out
    assert {min(Image.open(p).size) for p in split} == {300}
    assert {Image.open(p).size for p in split} == {(400, 300)}  # the 4:3 canvas kept
    assert {Image.open(p).size for p in (tmp_path / "corpus").glob("p*.jpg")} == {(160, 120)}
