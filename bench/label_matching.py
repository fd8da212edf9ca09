"""Label matching throughput: ``LabelMatcher.find`` against one ``\\b`` regex per term.

Run: ``.venv/bin/python -m bench.label_matching [--labels 1000] [--captions 1000000]
[--baseline-captions 5000] [--seed 0]``

All figures come from one run on the same generated data:

- labels: WordNet-like ids (``n0xxxxxxx``) with 1-3 English names each (``noun``,
  ``adjective noun``, ``adjective adjective noun``, ``noun noun``); the terms are built by
  ``label_terms`` (id + names), as an audit does;
- captions: 10-15 words of filler, adjectives and scene nouns (none of them a label noun),
  about a third with a label name or id inserted;
- ours: ``LabelMatcher.find`` on every caption (automaton built once, build time reported);
- baseline: for each caption, ``finditer`` of one compiled ``\\b<term>\\b`` (IGNORECASE) per
  term. It is measured on the first ``--baseline-captions`` captions only and compared as a
  rate (captions/s), i.e. extrapolated to the full set;
- agreement: on that subsample both hit lists are compared as (caption, label, start, end)
  sets, after dropping, per label, hits inside a longer hit of the same label (what ``find``
  reports). The vocabulary has no plural-looking words, so both should agree exactly;
- variants: label names written as plurals, snake_case, CamelCase, hyphenated and upper case
  (what file names and tags look like), recall of each method.

Target (issue "Metadata label leakage"): ours >= 20x the baseline.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Sequence

from tqdm import tqdm

from splitaudit.indexer.labels.matcher import LabelMatcher
from splitaudit.indexer.labels.names import label_terms
from splitaudit.indexer.labels.normalize import singular


def _words(text: str) -> list[str]:
    return text.split()


ADJECTIVES = _words("""
red blue green yellow black white brown grey orange purple golden silver spotted striped
little giant wild common great lesser northern southern eastern western arctic desert mountain
sea river forest garden royal dwarf pygmy long short tall small big old young bald crested
horned tufted ringed banded crowned masked painted hooded fire snow sand rock marsh swamp
ancient modern electric wooden iron steel glass plastic paper leather velvet silk woolen
""")

NOUNS = _words("""
cat dog fox wolf bear lion tiger leopard jaguar panther otter beaver badger ferret weasel
rabbit hare squirrel chipmunk mouse rat hamster gerbil mole shrew bat hedgehog deer elk moose
goat sheep cow bull horse donkey mule camel llama alpaca zebra giraffe hippo rhino elephant
monkey gorilla chimpanzee baboon lemur sloth koala kangaroo wallaby platypus seal walrus
whale dolphin shark ray eel trout salmon carp pike perch cod tuna owl hawk eagle falcon
vulture crow raven jay robin sparrow finch wren heron crane stork swan goose duck
pelican parrot toucan penguin ostrich emu turtle tortoise lizard gecko iguana snake cobra
viper python frog toad newt beetle ant bee wasp moth butterfly spider crab lobster shrimp
snail slug worm jellyfish starfish coral sponge car truck bicycle boat ship train plane
rocket tractor scooter chair table lamp clock phone camera laptop guitar piano violin drum
kettle teapot cup mug bowl plate spoon fork knife bottle basket bucket umbrella hat helmet
boot glove scarf jacket sweater shirt skirt dress tent bridge tower castle barn church
""")

SCENE = _words("""
sky cloud tree leaf flower rose tulip lawn hill valley lake pond stream wave shore dune cliff
cave path trail fence gate wall door window roof floor sofa bed pillow blanket rug shelf
desk box bag toy ball stick log stone pebble puddle sunset sunrise light shadow city town
village market shop cafe kitchen garden yard porch deck pool fountain statue sign poster
""")

FILLER = _words("""
a an the this that one two some with on in at by near under over beside behind of and
photo picture image shot view close up sitting standing lying running walking looking
eating sleeping playing next to front from above during day night morning evening sunny
cloudy rainy background foreground field street park beach water grass snow road room
outside inside very quite really nice cute beautiful funny happy stock free high quality
""")


def _phrase(rng: random.Random) -> str:
    form = rng.random()
    if form < 0.15:
        return rng.choice(NOUNS)
    if form < 0.65:
        return f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    if form < 0.85:
        return f"{rng.choice(ADJECTIVES)} {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    return f"{rng.choice(NOUNS)} {rng.choice(NOUNS)}"


def make_labels(n: int, rng: random.Random) -> dict[str, list[str]]:
    """``n`` WordNet-like label ids, each with 1-3 unique names."""
    names: dict[str, list[str]] = {}
    used: set[str] = set()
    while len(names) < n:
        label = f"n{rng.randrange(10**7):08d}"
        if label in names:
            continue
        mine: list[str] = []
        for _ in range(rng.choice((1, 2, 2, 3))):
            phrase = _phrase(rng)
            if phrase not in used:
                used.add(phrase)
                mine.append(phrase)
        if mine:
            names[label] = mine
    return names


def make_captions(
    n: int, names: dict[str, list[str]], rng: random.Random, p_label: float = 0.35
) -> list[str]:
    """``n`` captions of 10-15 words; about ``p_label`` of them mention a label."""
    pool = FILLER * 3 + ADJECTIVES + SCENE
    labels = list(names)
    out: list[str] = []
    for _ in range(n):
        words = rng.choices(pool, k=rng.randint(10, 15))
        if rng.random() < p_label:
            label = rng.choice(labels)
            mention = label if rng.random() < 0.1 else rng.choice(names[label])
            words.insert(rng.randrange(len(words) + 1), mention)
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + ".")
    return out


def _variant(name: str, rng: random.Random) -> str:
    words = name.split()
    form = rng.randrange(5)
    if form == 0:
        last = words[-1]
        words[-1] = last + ("es" if last.endswith(("s", "x", "ch", "sh")) else "s")
        return " ".join(words)
    if form == 1:
        return "_".join(words) + f"_{rng.randrange(10000):04d}.jpg"
    if form == 2:
        return "".join(w.capitalize() for w in words) + ".png"
    if form == 3:
        return "-".join(words)
    return name.upper()


class RegexBaseline:
    """One compiled ``\\b<term>\\b`` per term, tried one after the other on each caption."""

    def __init__(self, terms: dict[str, list[str]]) -> None:
        self.patterns = [
            (label, term, re.compile(r"\b" + re.escape(term) + r"\b", re.IGNORECASE))
            for label, label_terms_ in terms.items()
            for term in label_terms_
        ]

    def find(self, text: str) -> list[tuple[str, int, int]]:
        """(label, start, end) of every term occurrence."""
        return [
            (label, m.start(), m.end())
            for label, _term, rx in self.patterns
            for m in rx.finditer(text)
        ]


def _longest_per_label(hits: Sequence[tuple[str, int, int]]) -> set[tuple[str, int, int]]:
    reach: dict[str, int] = {}
    kept: set[tuple[str, int, int]] = set()
    for label, start, end in sorted(hits, key=lambda h: (h[1], -h[2], h[0])):
        if end <= reach.get(label, -1):
            continue
        reach[label] = end
        kept.add((label, start, end))
    return kept


def _check_vocabulary() -> None:
    for word in {*ADJECTIVES, *NOUNS, *SCENE, *FILLER}:
        if singular(word) != word:
            raise SystemExit(f"bench vocabulary word {word!r} has a plural key; pick another")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print captions/s, the speed-up and the agreement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=1000)
    parser.add_argument("--captions", type=int, default=1_000_000)
    parser.add_argument("--baseline-captions", type=int, default=5_000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    _check_vocabulary()
    rng = random.Random(args.seed)

    names = make_labels(args.labels, rng)
    terms = label_terms(names, names)
    n_terms = sum(map(len, terms.values()))
    t0 = time.perf_counter()
    matcher = LabelMatcher(terms)
    build_s = time.perf_counter() - t0
    baseline = RegexBaseline(terms)
    print(
        f"labels: {len(terms):,} ({n_terms:,} terms incl. ids; "
        f"{n_terms / len(terms):.2f} per label); automaton built in {build_s * 1000:.0f} ms"
    )

    # Baseline and agreement on the first captions (the same ones ours sees first).
    sample = make_captions(min(args.baseline_captions, args.captions), names, rng)
    t0 = time.perf_counter()
    base_hits = [
        baseline.find(c) for c in tqdm(sample, desc="regex baseline", leave=False, disable=None)
    ]
    base_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    our_hits = [matcher.find(c) for c in sample]
    our_sample_s = time.perf_counter() - t0
    ours_set = {(i, h.label, h.start, h.end) for i, hs in enumerate(our_hits) for h in hs}
    base_set = {(i, *h) for i, hs in enumerate(base_hits) for h in _longest_per_label(hs)}
    both = len(ours_set & base_set)
    union = len(ours_set | base_set)

    # Ours on every caption, generated chunk by chunk (generation is not timed).
    n_done, our_s, n_hits, n_with_hit = 0, 0.0, 0, 0
    bar = tqdm(total=args.captions, desc="LabelMatcher.find", leave=False, disable=None)
    chunk_rng = random.Random(args.seed + 1)
    while n_done < args.captions:
        chunk = sample if n_done == 0 else []
        if not chunk:
            chunk = make_captions(min(args.chunk, args.captions - n_done), names, chunk_rng)
        t0 = time.perf_counter()
        results = [matcher.find(c) for c in chunk]
        our_s += time.perf_counter() - t0
        n_hits += sum(map(len, results))
        n_with_hit += sum(1 for r in results if r)
        n_done += len(chunk)
        bar.update(len(chunk))
    bar.close()
    words = sum(len(c.split()) for c in sample) / max(1, len(sample))

    # Prevalence (labels only, no spans) on the subsample.
    t0 = time.perf_counter()
    for c in sample:
        matcher.mentions(c)
    mentions_s = time.perf_counter() - t0

    # Recall on file-name/tag-like spellings of the names.
    vrng = random.Random(args.seed + 2)
    variants = [(label, _variant(name, vrng)) for label, ns in names.items() for name in ns[:1]]
    ours_recall = sum(label in matcher.mentions(text) for label, text in variants)
    base_recall = sum(any(h[0] == label for h in baseline.find(text)) for label, text in variants)

    ours_rate = n_done / our_s
    base_rate = len(sample) / base_s
    print(
        f"captions: {n_done:,} generated, {words:.1f} words on average, "
        f"{n_with_hit / n_done:.1%} with at least one hit ({n_hits:,} hits)"
    )
    print(
        f"LabelMatcher.find  {n_done:>9,} captions in {our_s:7.2f} s = {ours_rate:>10,.0f} captions/s"
    )
    print(
        f"regex per term     {len(sample):>9,} captions in {base_s:7.2f} s = {base_rate:>10,.0f} "
        f"captions/s  (first {len(sample):,} captions only; rate extrapolated)"
    )
    print(
        f"speed-up: {ours_rate / base_rate:.1f}x (target >= 20x); on the same subsample: "
        f"{len(sample) / our_sample_s / base_rate:.1f}x"
    )
    print(f"LabelMatcher.mentions (prevalence path): {len(sample) / mentions_s:,.0f} captions/s")
    print(
        f"agreement on the subsample: {both:,} hits found by both, "
        f"{len(ours_set - base_set):,} only by ours, {len(base_set - ours_set):,} only by the "
        f"baseline ({both / max(1, union):.2%} identical)"
    )
    print(
        f"recall on {len(variants):,} plural/snake_case/CamelCase/hyphen/UPPER spellings: "
        f"ours {ours_recall / len(variants):.1%}, baseline {base_recall / len(variants):.1%}"
    )


if __name__ == "__main__":
    main()
