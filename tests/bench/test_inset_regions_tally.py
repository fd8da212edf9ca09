"""bench.inset_regions' scoring: an inset is found when it is near any corpus copy of its photo
(plain or under an overlay), a negative only when it is near nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.inset_regions import Query, tally


def _item(key: str, *near: str, semantic: str | None = None) -> dict:
    matches = [{"corpus_key": k, "kind": "near"} for k in near]
    if semantic is not None:
        matches.append({"corpus_key": semantic, "kind": "semantic"})
    return {"key": key, "matches": matches}


def test_insets_count_any_copy_of_their_photo_and_negatives_count_when_clean() -> None:
    queries = [
        Query("inset-30/0.png", "inset-30", "skimage-coffee"),
        Query("inset-30/1.png", "inset-30", "skimage-coffee"),
        Query("inset-30/2.png", "inset-30", "skimage-rocket"),
        Query("plain/3.png", "plain", None),
        Query("plain/4.png", "plain", None),
    ]
    report = {
        "items": [
            _item("inset-30/0.png", "skimage-coffee-frame.png"),  # an overlaid copy: found
            _item("inset-30/1.png", "skimage-coffee-x.png"),  # another photo's name: not
            _item("inset-30/2.png", semantic="skimage-rocket.png"),  # semantic is not near
            _item("plain/3.png", semantic="skimage-rocket.png"),  # clean: semantic only
            _item("plain/4.png", "skimage-rocket.png"),  # a false positive
        ]
    }
    assert tally(queries, report) == {"inset-30": [1, 3], "plain": [1, 2]}


def test_the_collage_and_the_slide_show_their_photos_framed() -> None:
    from skimage import data

    from bench.inset_regions import WEB_SIZE, collage, slide
    from splitaudit.indexer.match.framed_regions import framed_boxes

    photos = [Image.fromarray(getattr(data, n)()) for n in ("astronaut", "coffee", "chelsea")]
    grid = collage(photos * 3)
    assert grid.size == WEB_SIZE and len(framed_boxes(grid)) >= 6
    shown = slide(photos[1], 0.3, np.random.default_rng(0))
    [box] = framed_boxes(shown)
    assert 0.25 <= box[2] - box[0] <= 0.31 and box[0] >= 0.4  # right of the bullets


@pytest.mark.slow
def test_page_side_reduces_every_test_image_and_keeps_the_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import inset_regions
    from bench.accuracy import photos

    rng = np.random.default_rng(0)
    fake = [
        photos.Photo(
            f"p{k:02d}", "test", Image.fromarray(rng.integers(0, 255, (120, 160, 3), np.uint8))
        )
        for k in range(18)
    ]
    monkeypatch.setattr(photos, "collect_photos", lambda: fake)
    queries = inset_regions.build(tmp_path, seed=1, page_side=240)
    assert len(queries) == 9 * 5 + 9 * 9  # per indexed photo 5 positives, per held-out 9
    sides = {min(Image.open(tmp_path / "split" / q.key).size) for q in queries}
    assert sides == {240}
    corpus = {Image.open(p).size for p in (tmp_path / "corpus").iterdir()}
    assert corpus == {inset_regions.WEB_SIZE}
    # the same seed at another side is built again, not read from the manifest
    again = inset_regions.build(tmp_path, seed=1, page_side=360)
    assert [q.key for q in again] == [q.key for q in queries]
    assert {min(Image.open(tmp_path / "split" / q.key).size) for q in again} == {360}
