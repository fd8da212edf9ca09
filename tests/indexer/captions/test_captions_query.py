"""Caption queries: near copies found with their shared span, boilerplate never matches, LSH recall."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from splitaudit.indexer.captions.index import CaptionIndex, CaptionIndexWriter
from splitaudit.indexer.captions.minhash import LshParams, candidate_probability
from splitaudit.indexer.captions.normalize import content_tokens
from splitaudit.indexer.captions.query import (
    DEFAULT_JACCARD,
    CaptionThresholds,
    find_caption_matches,
    split_caption_thresholds,
)
from splitaudit.indexer.errors import UsageError

WORDS = [
    "amber",
    "anchor",
    "apple",
    "arch",
    "autumn",
    "badge",
    "bakery",
    "bamboo",
    "banner",
    "barrel",
    "basket",
    "beacon",
    "beetle",
    "bell",
    "bench",
    "berry",
    "blossom",
    "boulder",
    "bramble",
    "bridge",
    "bucket",
    "cabin",
    "cactus",
    "candle",
    "canyon",
    "carpet",
    "castle",
    "cedar",
    "chapel",
    "cherry",
    "chimney",
    "cliff",
    "clock",
    "cloud",
    "comet",
    "copper",
    "coral",
    "cotton",
    "crater",
    "crystal",
    "dagger",
    "desert",
    "dragon",
    "drum",
    "dune",
    "eagle",
    "ember",
    "engine",
    "falcon",
    "feather",
    "fern",
    "ferry",
    "fiddle",
    "flame",
    "forest",
    "fountain",
    "garden",
    "garnet",
    "geyser",
    "ginger",
    "glacier",
    "goblet",
    "granite",
    "harbor",
    "harvest",
    "hazel",
    "helmet",
    "heron",
    "hill",
    "honey",
    "island",
    "ivory",
    "jasmine",
    "jetty",
    "kettle",
    "kite",
    "lagoon",
    "lantern",
    "lava",
    "lemon",
    "lighthouse",
    "lily",
    "lotus",
    "maple",
    "marble",
    "meadow",
    "mirror",
    "mist",
    "moss",
    "mountain",
    "needle",
    "oak",
    "oasis",
    "olive",
    "orchard",
    "otter",
    "paddle",
    "palace",
    "panda",
    "pebble",
    "pepper",
    "pine",
    "pirate",
    "plum",
    "pond",
    "quartz",
    "quill",
    "rabbit",
    "raven",
    "reef",
    "ribbon",
    "river",
    "robin",
    "saddle",
    "salmon",
    "sapphire",
    "scarf",
    "shell",
    "silver",
    "sparrow",
    "spruce",
    "statue",
    "stone",
    "summit",
    "swan",
    "temple",
    "thistle",
    "thunder",
    "tiger",
    "timber",
    "tulip",
    "tunnel",
    "valley",
    "velvet",
    "violet",
    "walnut",
    "willow",
    "window",
    "wolf",
    "yarn",
    "zebra",
]


def _caption(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16)))


def _index(tmp_path: Path, corpus: Sequence[str], **kw: object) -> CaptionIndex:
    writer = CaptionIndexWriter(tmp_path / "captions", "c", **kw)  # type: ignore[arg-type]
    writer.add(np.arange(1, len(corpus) + 1, dtype=np.int64), list(corpus))
    writer.commit()
    return CaptionIndex.load(
        tmp_path / "captions", "c", lambda ids: {i: corpus[i - 1] for i in ids}
    )


def test_near_copy_is_found_with_its_shared_span(tmp_path: Path) -> None:
    rng = random.Random(0)
    corpus = [_caption(rng) for _ in range(500)]
    corpus[41] = (
        "A young heron waiting on the stone jetty at dawn, while two otters play in the reeds"
    )
    index = _index(tmp_path, corpus)
    tests = [
        (7, "while two otters play in the reeds, a young heron waiting on the stone jetty at dawn"),
        (
            8,
            "A YOUNG HERON waiting on the stone jetty at dawn -- while two otters play in the reeds!",
        ),
        (9, "a lonely fox asleep under the old oak tree in the autumn rain"),
    ]
    hits = {h.test_id: h for h in find_caption_matches(index, tests)}
    assert set(hits) == {7, 8}
    near, exact = hits[7], hits[8]
    assert near.item_id == exact.item_id == 42
    assert near.kind == "near" and DEFAULT_JACCARD <= near.jaccard < 1
    assert near.shared_span == "a young heron waiting on the stone jetty at dawn"
    assert exact.kind == "exact" and exact.jaccard == 1.0
    assert exact.evidence()["exact"] is True
    assert exact.evidence()["corpus_caption"] == corpus[41]
    assert exact.evidence()["test_caption"] == tests[1][1]


def test_boilerplate_alone_never_matches(tmp_path: Path) -> None:
    rng = random.Random(1)
    corpus = [_caption(rng) for _ in range(300)]
    corpus += ["Image may contain: person, dog, outdoor"] * 40
    corpus += ["stock photo", "", "Sunset", "royalty free stock photo"] * 10
    # 120 different captions around one stock suffix: the suffix's shingles become common
    corpus += [
        f"{rng.choice(WORDS)} {rng.choice(WORDS)} - download this stock photo now for your website"
        for _ in range(120)
    ]
    corpus.append("stock photo - a golden retriever puppy chewing a red ball on green grass")
    index = _index(tmp_path, corpus)
    tests = [
        (1, "Image may contain: person, dog, outdoor"),  # exact, but only a tag list
        (2, "stock photo"),
        (3, ""),
        (4, "Sunset"),
        (5, "harbor pirate - download this stock photo now for your website"),  # common suffix only
        (6, "stock photo - a tabby kitten asleep in a cardboard box under the stairs"),
        (7, "STOCK PHOTO: a golden retriever puppy chewing a red ball on green grass"),  # real copy
    ]
    hits = find_caption_matches(index, tests, thresholds=CaptionThresholds(jaccard=0.3))
    assert {h.test_id for h in hits} == {7}
    assert hits[0].kind == "exact"  # the boilerplate prefix is not part of the compared text


def test_a_caption_repeated_all_over_the_corpus_is_stock_text(tmp_path: Path) -> None:
    rng = random.Random(2)
    stock = "a beautiful view of the mountains and the lake in the summer"
    corpus = [_caption(rng) for _ in range(200)] + [stock] * 60
    index = _index(tmp_path, corpus)
    assert find_caption_matches(index, [(1, stock)]) == []
    rare = _index(tmp_path / "rare", [_caption(rng) for _ in range(200)] + [stock] * 3)
    assert {h.kind for h in find_caption_matches(rare, [(1, stock)])} == {"exact"}


def test_each_test_item_reports_a_corpus_item_once_and_at_most_max_hits(tmp_path: Path) -> None:
    base = "an old wooden fishing boat pulled up on the pebble beach below the white cliffs"
    corpus = [base, base + " at dusk", base.replace("old", "aged"), "unrelated " * 8]
    index = _index(tmp_path, corpus)
    captions = [(5, base), (5, base.upper()), (5, base + "!")]
    hits = find_caption_matches(index, captions, thresholds=CaptionThresholds(max_hits=2))
    assert [h.item_id for h in hits] == [1, 2]  # exact first, then the best near
    assert all(h.test_id == 5 for h in hits)


def _truth(a: list[str], b: list[str], th: CaptionThresholds) -> bool:
    sa, sb = set(itertools.pairwise(a)), set(itertools.pairwise(b))
    shared = len(sa & sb)
    if min(len(a), len(b)) < th.rules.min_tokens:
        return False
    contained = min(len(a), len(b)) >= th.containment_min_tokens and shared >= th.containment * min(
        len(sa), len(sb)
    )
    return shared / len(sa | sb) >= th.jaccard or contained or a == b


@pytest.mark.slow
@pytest.mark.parametrize("jaccard", [0.5, DEFAULT_JACCARD])
def test_lsh_recall_against_brute_force_jaccard(tmp_path: Path, jaccard: float) -> None:
    """Every pair the brute-force rule accepts, on 3000 captions with planted edits."""
    rng = random.Random(3)
    corpus = [_caption(rng) for _ in range(3000)]
    queries = []
    for q in range(400):
        words = corpus[rng.randrange(len(corpus))].split()
        for _ in range(rng.randint(0, 4)):  # 0-4 word swaps: Jaccard spread over 0.3-1
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        if rng.random() < 0.3:
            words = words[: max(5, int(len(words) * 0.8))]
        queries.append((q, " ".join(words)))
    queries += [(400 + q, _caption(rng)) for q in range(200)]  # unrelated
    th = CaptionThresholds(jaccard=jaccard, max_hits=50)
    index = _index(tmp_path, corpus)
    found = {(h.test_id, h.item_id) for h in find_caption_matches(index, queries, thresholds=th)}
    tokens = [content_tokens(c) for c in corpus]
    truth = set()
    for q, text in queries:
        a = content_tokens(text)
        truth |= {(q, i + 1) for i, b in enumerate(tokens) if _truth(a, b, th)}
    assert len(truth) > 150
    assert found <= truth  # verification is exact: nothing outside the rule is reported
    recall = len(found & truth) / len(truth)
    # banding alone would find a pair at the threshold with this probability (and higher above)
    assert candidate_probability(jaccard, LshParams()) > 0.85
    assert recall >= 0.95, recall


def test_thresholds_from_an_audits_thresholds_json() -> None:
    rest, th = split_caption_thresholds(
        {"phash_hamming": 6, "caption_jaccard": 0.5, "caption_min_tokens": 4}
    )
    assert rest == {"phash_hamming": 6}
    assert th.jaccard == 0.5 and th.rules.min_tokens == 4
    assert th.containment == CaptionThresholds().containment  # untouched keys keep defaults
    assert CaptionThresholds.from_mapping(th.to_dict()) == th  # the report's record reads back
    with pytest.raises(UsageError, match=r"unknown caption threshold.*caption_jacard.*valid"):
        CaptionThresholds.from_mapping({"caption_jacard": 0.5})
    with pytest.raises(UsageError, match=r"caption_jaccard must be a number in \(0, 1\]"):
        CaptionThresholds.from_mapping({"caption_jaccard": 1.5})
    with pytest.raises(UsageError, match="caption_min_tokens must be a whole number"):
        CaptionThresholds.from_mapping({"caption_min_tokens": "five"})


def test_a_huge_caption_is_cut_not_choked_on(tmp_path: Path) -> None:
    rng = random.Random(4)
    text = _caption(rng)
    index = _index(tmp_path, [text, _caption(rng)])
    huge = text + " " + "filler " * 200_000
    hits = find_caption_matches(index, [(1, huge)])
    assert [h.item_id for h in hits] == [1]  # its first 10,000 characters contain the copy
