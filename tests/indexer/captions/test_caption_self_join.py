"""Caption self-join of a corpus: against brute-force Jaccard, boilerplate never pairs items."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from splitaudit.indexer.captions.index import CaptionIndex, CaptionIndexWriter
from splitaudit.indexer.captions.minhash import LshParams, candidate_probability
from splitaudit.indexer.captions.normalize import content_tokens, shingle_hashes_of
from splitaudit.indexer.captions.query import CaptionThresholds
from splitaudit.indexer.captions.self_join import caption_self_join
from splitaudit.indexer.dedup.unionfind import UnionFind

# 200 distinct made-up words: random captions share a bigram by chance only rarely.
WORDS = [a + b for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti", "va", "ze") for b in (
    "bar", "cel", "dun", "fim", "gor", "hal", "jex", "kip", "lum", "mor",
    "nex", "pol", "quo", "rin", "sat", "tov", "ulm", "vek", "wis", "yon",
)]  # fmt: skip


def _caption(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16)))


def _index(tmp_path: Path, corpus: Sequence[str]) -> CaptionIndex:
    writer = CaptionIndexWriter(tmp_path / "captions", "c", segment_rows=1_500)
    for start in range(0, len(corpus), 1_000):  # several segments: the join spans them
        stop = min(start + 1_000, len(corpus))
        writer.add(np.arange(start + 1, stop + 1, dtype=np.int64), list(corpus[start:stop]))
    writer.commit()
    return CaptionIndex.load(
        tmp_path / "captions", "c", lambda ids: {i: corpus[i - 1] for i in ids}
    )


def _rule(a: list[str], b: list[str], th: CaptionThresholds) -> tuple[bool, float]:
    """The documented rule (without the corpus-frequency layer), and the pair's Jaccard."""
    sa, sb = set(itertools.pairwise(a)), set(itertools.pairwise(b))
    if min(len(a), len(b)) < th.rules.min_tokens:
        return False, 0.0
    shared = len(sa & sb)
    jaccard = shared / len(sa | sb)
    contained = min(len(a), len(b)) >= th.containment_min_tokens and shared >= th.containment * min(
        len(sa), len(sb)
    )
    return a == b or jaccard >= th.jaccard or contained, 1.0 if a == b else jaccard


@pytest.mark.parametrize("jaccard", [0.5, 0.6])
def test_self_join_against_brute_force_jaccard(tmp_path: Path, jaccard: float) -> None:
    rng = random.Random(7)
    corpus = [_caption(rng) for _ in range(2_400)]
    for _ in range(900):  # copies with 0-4 word swaps, some truncated, some verbatim
        words = corpus[rng.randrange(len(corpus))].split()
        for _ in range(rng.randint(0, 4)):
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        if rng.random() < 0.3:
            words = words[: max(5, int(len(words) * 0.8))]
        corpus.append(" ".join(words) if rng.random() < 0.8 else " ".join(words).upper() + "!")
    rng.shuffle(corpus)
    th = CaptionThresholds(jaccard=jaccard)
    index = _index(tmp_path, corpus)
    assert len(index.segments) >= 2
    join = caption_self_join(index, th)

    # brute force over every pair sharing a bigram (the others have Jaccard 0)
    tokens = [content_tokens(c) for c in corpus]
    holders: dict[tuple[str, str], set[int]] = defaultdict(set)
    for i, t in enumerate(tokens):
        for s in itertools.pairwise(t):
            holders[s].add(i)
    touching = {(i, j) for h in holders.values() for i in h for j in h if i < j}
    truth: dict[tuple[int, int], float] = {}
    for i, j in touching:
        ok, jac = _rule(tokens[i], tokens[j], th)
        if ok:
            truth[(i + 1, j + 1)] = jac
    assert len(truth) > 300

    found = {(p.a, p.b): p for p in join.pairs}
    # nothing below the rule: each pair found is a true pair, with its Jaccard
    for (a, b), p in found.items():
        assert (a, b) in truth, (corpus[a - 1], corpus[b - 1])
        assert p.jaccard == pytest.approx(truth[(a, b)])
        assert p.exact == (tokens[a - 1] == tokens[b - 1])
    # nothing missed above threshold + 0.2 (where banding alone finds a pair with probability
    # 1 - (1 - J**4)**32 >= 0.9998): both items end in the same cluster
    uf = UnionFind()
    for a, b in found:
        uf.union(a, b)
    common = index.state.captions
    strong = [
        pair
        for pair, jac in truth.items()
        if jac >= jaccard + 0.2
        and np.count_nonzero(
            index.frequency.frequency(
                shingle_hashes_of(
                    set(itertools.pairwise(tokens[pair[0] - 1]))
                    & set(itertools.pairwise(tokens[pair[1] - 1]))
                )
            )
            < th.rules.common_count(common)
        )
        >= th.rules.min_informative_shared
    ]
    assert len(strong) > 100
    assert candidate_probability(jaccard + 0.2, LshParams()) > 0.9998
    missed = [(a, b) for a, b in strong if uf.find(a) != uf.find(b)]
    assert missed == [], [truth[m] for m in missed]
    # and overall (at the threshold itself) the banding finds nearly every pair
    joined = sum(1 for a, b in truth if uf.find(a) == uf.find(b))
    assert joined / len(truth) >= 0.95
    assert join.stats["pairs"] == len(found) and join.stats["exact_pairs"] > 0


def test_boilerplate_only_captions_never_cluster(tmp_path: Path) -> None:
    rng = random.Random(1)
    corpus = [_caption(rng) for _ in range(300)]
    corpus += ["Image may contain: person, dog, outdoor"] * 40  # a tag list: too short
    corpus += ["stock photo", "", "Sunset", "royalty free stock photo"] * 10  # empty / short
    # 120 different captions around one stock suffix: the suffix's shingles become common
    corpus += [
        f"{rng.choice(WORDS)} {rng.choice(WORDS)} - download this stock photo now for your website"
        for _ in range(120)
    ]
    stock = "a beautiful view of the mountains and the lake in the summer"
    corpus += [stock] * 60  # one caption repeated all over the corpus: stock text
    real = "stock photo - a golden retriever puppy chewing a red ball on green grass"
    corpus += [real, "STOCK PHOTO: a golden retriever puppy chewing a red ball on green grass"]
    index = _index(tmp_path, corpus)
    join = caption_self_join(index, CaptionThresholds(jaccard=0.3))
    pairs = [(corpus[p.a - 1], corpus[p.b - 1]) for p in join.pairs]
    assert pairs == [(real, corpus[-1])]  # the one real copy, nothing else
    assert join.pairs[0].exact
    assert join.stats["stock_captions"] == 60


def test_empty_index_joins_to_nothing(tmp_path: Path) -> None:
    index = _index(tmp_path, ["", "one", "two words"])
    assert caption_self_join(index).pairs == []
