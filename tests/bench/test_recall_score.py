"""``bench.recall.score``: a copy also matched to another image of its own photo (a tile inside
the 384-px copy of that photo) is a crop relation, counted apart from a match to another
photo's image, which is what the bench calls wrong."""

from __future__ import annotations

from bench.recall import Query, score, source_photo


def test_source_photo_reads_tile_and_large_names_and_not_distractors() -> None:
    assert source_photo("skimage-text-t4-48.png") == "skimage-text"
    assert source_photo("darknet-dog-large.png") == "darknet-dog"
    assert source_photo("skimage-hubble_deep_field-t0-96.png") == "skimage-hubble_deep_field"
    assert source_photo("d-10570-80.png") is None
    assert source_photo("notes.txt") is None


def test_wrong_counts_other_photos_and_related_counts_the_same_photo() -> None:
    queries = [
        Query("orient-mirror/0001.png", "orient-mirror", 384, "darknet-dog-large.png"),
        Query("zoom/0002.png", "zoom", 96, "skimage-moon-t4-96.png"),
        Query("combo/0003.png", "combo", 96, "sklearn-flower-t2-96.png"),
        Query("shift/0004.png", "shift", 32, "skimage-text-t0-32.png"),
        Query("sibling/0005.png", "sibling", 32, None),
    ]
    flagged = {
        # the mirrored photo holds its own tiles: a crop relation
        "orient-mirror/0001.png": {"darknet-dog-large.png", "darknet-dog-t6-96.png"},
        "zoom/0002.png": {"skimage-moon-t4-96.png", "skimage-moon-large.png"},
        # a distractor: wrong, and the target was not found
        "combo/0003.png": {"d-09579-96.png"},
        # another photo's tile beside its own photo's large copy: wrong and related
        "shift/0004.png": {
            "skimage-text-t0-32.png",
            "skimage-text-large.png",
            "skimage-page-t2-32.png",
        },
        "sibling/0005.png": {"skimage-brick-t4-48.png"},
    }
    outcome = score(queries, flagged)
    assert outcome.wrong == 2
    assert outcome.related == 3
    assert outcome.found["combo"] == [0, 1]
    assert outcome.found["sibling"] == [1, 1]  # a negative's flag is its false-positive rate
    assert outcome.found_keys == frozenset(
        {"orient-mirror/0001.png", "zoom/0002.png", "shift/0004.png"}
    )
