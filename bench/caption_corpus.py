"""Generated caption corpora for the caption bench: templates, paraphrase rules, planted test captions.

Corpus captions are 6-25 words built from templates over a hand-made vocabulary (subjects,
colours, materials, actions, places, times, second clauses); about 12 % of them carry
boilerplate (``image may contain: ...`` tag lists, ``stock photo`` prefixes, empty and one-word
captions), as crawled alt-text does. Test captions are planted per family:

- ``exact``: a corpus caption verbatim;
- ``repunct``: the same words, re-cased, re-punctuated, re-spaced (exact after normalisation);
- ``reorder``: clauses swapped (``A, while B`` -> ``while B, A``; a time phrase moved to the front);
- ``synonym``: one or two content words swapped for synonyms;
- ``truncated``: the first 60-75 % of the words;
- ``boilerplate``: a different caption that shares only boilerplate with its corpus caption
  (its content words come from a held-out vocabulary the corpus never uses);
- ``unrelated``: a caption from the same templates over the held-out vocabulary: it shares the
  template scaffolding ("parked on", "at dawn", "while a ... watches") and colours, never content;
- ``chance``: a fresh caption from the corpus vocabulary. The template space is small enough that
  some of these sit one or two words away from a corpus caption by chance, which text alone
  cannot tell from a light rewrite: their match rate is the floor any caption matcher has here.

The first five should match their source; ``boilerplate`` and ``unrelated`` never should.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

SUBJECTS = [
    "car",
    "truck",
    "bicycle",
    "motorcycle",
    "bus",
    "tram",
    "train",
    "boat",
    "kayak",
    "canoe",
    "sailboat",
    "ferry",
    "tractor",
    "van",
    "dog",
    "cat",
    "horse",
    "cow",
    "sheep",
    "goat",
    "fox",
    "deer",
    "rabbit",
    "squirrel",
    "owl",
    "heron",
    "swan",
    "duck",
    "parrot",
    "pigeon",
    "woman",
    "man",
    "girl",
    "boy",
    "child",
    "toddler",
    "grandmother",
    "grandfather",
    "chef",
    "surfer",
    "skier",
    "climber",
    "runner",
    "cyclist",
    "farmer",
    "fisherman",
    "painter",
    "violinist",
    "guitarist",
    "drummer",
    "dancer",
    "juggler",
    "photographer",
    "lighthouse",
    "windmill",
    "bridge",
    "cathedral",
    "cottage",
    "barn",
    "tent",
    "kite",
    "balloon",
    "umbrella",
    "lantern",
    "teapot",
]
COLOURS = [
    "red",
    "blue",
    "green",
    "yellow",
    "black",
    "white",
    "brown",
    "grey",
    "orange",
    "purple",
    "golden",
    "silver",
    "pink",
    "teal",
    "navy",
    "crimson",
    "beige",
    "turquoise",
    "maroon",
    "olive",
]
TRAITS = [
    "old",
    "young",
    "small",
    "large",
    "rusty",
    "shiny",
    "wet",
    "muddy",
    "vintage",
    "tiny",
    "enormous",
    "sleepy",
    "happy",
    "lonely",
    "curious",
    "striped",
    "spotted",
    "wooden",
    "painted",
    "broken",
]
ACTIONS = [
    "parked",
    "resting",
    "standing",
    "waiting",
    "sleeping",
    "sitting",
    "running",
    "walking",
    "posing",
    "jumping",
    "playing",
    "drifting",
    "leaning",
    "hiding",
    "glowing",
    "reflected",
    "perched",
    "floating",
    "stranded",
    "displayed",
    "photographed from above",
    "seen from below",
    "framed by trees",
    "covered in snow",
    "lit by lanterns",
]
PREPOSITIONS = [
    "on",
    "near",
    "beside",
    "behind",
    "in front of",
    "under",
    "above",
    "along",
    "across",
    "inside",
    "outside of",
    "at",
]
PLACES = [
    "the beach",
    "a busy street",
    "a quiet village square",
    "the harbour",
    "an empty parking lot",
    "a forest path",
    "the riverbank",
    "a snowy mountain pass",
    "the old town",
    "a sunflower field",
    "a rainy platform",
    "the market",
    "a rooftop garden",
    "the desert road",
    "a frozen lake",
    "the stone pier",
    "a country lane",
    "the cliff edge",
    "a city park",
    "the vineyard",
    "a train station",
    "the lighthouse steps",
    "a wheat field",
    "the canal",
    "a wooden dock",
    "the football pitch",
    "a misty valley",
    "the campsite",
    "a narrow alley",
    "the botanical garden",
    "a fishing village",
    "the ski slope",
    "a sandy dune",
    "the palace gate",
    "a flower market",
    "the playground",
    "an abandoned factory",
    "the pine forest",
    "a coral reef",
    "the bay",
]
TIMES = [
    "at dawn",
    "at sunset",
    "at night",
    "in the rain",
    "in the fog",
    "on a sunny afternoon",
    "in winter",
    "during a storm",
    "in early spring",
    "under a full moon",
    "at golden hour",
    "on a cloudy morning",
    "after the rain",
    "in late autumn",
    "at midday",
    "before the storm",
]
SECOND = [
    "while a {c} {s} watches",
    "as a {c} {s} passes by",
    "with a {c} {s} in the background",
    "and a {t} {s} waits nearby",
    "next to a {c} {s}",
    "while children play nearby",
    "as tourists take pictures",
    "with mountains in the distance",
    "under a {c} sky",
    "surrounded by {c} flowers",
]
TEMPLATES = (
    "a {t} {c} {s} {a} {p} {pl}",
    "a {c} {s} {a} {p} {pl} {tm}",
    "{tm}, a {t} {c} {s} {a} {p} {pl}",
    "a {t} {c} {s} {a} {p} {pl}, {second}",
    "the {c} {s} {a} {p} {pl} {tm}, {second}",
    "close up of a {t} {s} {a} {p} {pl}",
    "two {c} {s}s {a} {p} {pl} {tm}",
    "a {c} and {c2} {s} {a} {p} {pl}, {second}",
)
# Content words the corpus never uses: test captions over them share only scaffolding.
HELD_OUT_SUBJECTS = [
    "zeppelin",
    "glider",
    "hovercraft",
    "submarine",
    "rickshaw",
    "gondola",
    "unicycle",
    "snowmobile",
    "yak",
    "walrus",
    "flamingo",
    "peacock",
    "astronaut",
    "beekeeper",
    "blacksmith",
    "sculptor",
    "harpist",
    "acrobat",
    "carousel",
    "totem",
]
HELD_OUT_PLACES = [
    "the glacier",
    "a volcanic crater",
    "the salt flats",
    "a bamboo grove",
    "the observatory",
    "a tea plantation",
    "the lagoon",
    "a mangrove swamp",
    "the quarry",
    "an ice cave",
    "the fjord",
    "a lavender farm",
]
HELD_OUT_ACTIONS = [
    "hovering",
    "tethered",
    "capsized",
    "gleaming",
    "toppled",
    "submerged",
    "abandoned",
    "decorated",
]
SYNONYMS = {
    "car": "automobile",
    "truck": "lorry",
    "boat": "vessel",
    "dog": "puppy",
    "cat": "kitten",
    "woman": "lady",
    "man": "gentleman",
    "child": "kid",
    "boy": "lad",
    "old": "aged",
    "small": "little",
    "large": "big",
    "enormous": "huge",
    "tiny": "minute",
    "happy": "cheerful",
    "parked": "stopped",
    "resting": "relaxing",
    "sitting": "seated",
    "running": "racing",
    "walking": "strolling",
    "near": "close to",
    "beside": "next to",
    "under": "beneath",
    "beach": "seashore",
    "street": "road",
    "harbour": "port",
    "path": "trail",
    "market": "bazaar",
    "sunset": "dusk",
    "dawn": "sunrise",
    "night": "nighttime",
    "rain": "drizzle",
    "red": "scarlet",
    "grey": "gray",
    "watches": "looks on",
    "waits": "lingers",
    "nearby": "close by",
}
BOILERPLATE_PREFIXES = ("stock photo - ", "Stock Photo: ", "royalty free stock photo of ")
TAGS = [
    "person",
    "people",
    "outdoor",
    "nature",
    "sky",
    "tree",
    "car",
    "dog",
    "text",
    "food",
    "indoor",
    "water",
    "grass",
    "1 person",
    "smiling",
]


@dataclass(frozen=True, slots=True)
class Planted:
    """One test caption: its family and the corpus row it was derived from (``-1``: none)."""

    family: str
    text: str
    source: int


FAMILIES = (
    "exact",
    "repunct",
    "reorder",
    "synonym",
    "truncated",
    "boilerplate",
    "unrelated",
    "chance",
)
POSITIVE = FAMILIES[:5]


def content_caption(rng: random.Random, *, held_out: bool = False) -> str:
    """A fresh template caption without boilerplate (``held_out``: content words the corpus lacks)."""
    subjects = HELD_OUT_SUBJECTS if held_out else SUBJECTS
    template = rng.choice(TEMPLATES)
    second = rng.choice(SECOND).format(
        c=rng.choice(COLOURS), s=rng.choice(subjects), t=rng.choice(TRAITS)
    )
    return template.format(
        t=rng.choice(TRAITS),
        c=rng.choice(COLOURS),
        c2=rng.choice(COLOURS),
        s=rng.choice(subjects),
        a=rng.choice(HELD_OUT_ACTIONS if held_out else ACTIONS),
        p=rng.choice(PREPOSITIONS),
        pl=rng.choice(HELD_OUT_PLACES if held_out else PLACES),
        tm=rng.choice(TIMES),
        second=second,
    )


def corpus_caption(rng: random.Random) -> str:
    """One corpus caption: mostly template text, sometimes boilerplate (as crawled alt-text)."""
    roll = rng.random()
    if roll < 0.04:
        tags = rng.sample(TAGS, rng.randint(1, 4))
        return "Image may contain: " + ", ".join(tags)
    if roll < 0.06:
        return rng.choice(("stock photo", "Stock Image", "royalty free stock photo", "image"))
    if roll < 0.07:
        return ""
    if roll < 0.08:
        return rng.choice(SUBJECTS).capitalize()
    text = content_caption(rng)
    if roll < 0.12:
        return rng.choice(BOILERPLATE_PREFIXES) + text
    return text[0].upper() + text[1:] + ("." if rng.random() < 0.5 else "")


def corpus_captions(n: int, seed: int = 0) -> Iterator[str]:
    """``n`` corpus captions, reproducible from ``seed``."""
    rng = random.Random(seed)
    for _ in range(n):
        yield corpus_caption(rng)


def _words(text: str) -> list[str]:
    return text.replace(",", " ,").replace(".", "").split()


def repunct(text: str, rng: random.Random) -> str:
    """Same words, other case, punctuation and spacing."""
    words = text.replace(",", "").replace(".", "").split()
    out = []
    for w in words:
        w = w.upper() if rng.random() < 0.2 else w.capitalize() if rng.random() < 0.3 else w
        out.append(w + (rng.choice([",", ";", " -", ":"]) if rng.random() < 0.15 else ""))
    return "  ".join(out) + rng.choice(["!", "...", " .", "?"])


def reorder(text: str, rng: random.Random) -> str:
    """Clauses swapped, or the time phrase moved to the other end."""
    if ", " in text:
        head, _, tail = text.partition(", ")
        return f"{tail}, {head}"
    for tm in TIMES:
        if text.endswith(" " + tm):
            return f"{tm}, {text[: -len(tm) - 1]}"
    words = text.split()
    cut = len(words) // 2
    return " ".join(words[cut:] + words[:cut])


def synonym(text: str, rng: random.Random) -> str:
    """One or two words swapped for synonyms (a word appended when none has a synonym)."""
    words = text.split()
    spots = [i for i, w in enumerate(words) if w.strip(",.").lower() in SYNONYMS]
    rng.shuffle(spots)
    for i in spots[: rng.choice((1, 2))]:
        bare = words[i].strip(",.").lower()
        words[i] = words[i].lower().replace(bare, SYNONYMS[bare])
    if not spots:
        words.insert(len(words) // 2, "quietly")
    return " ".join(words)


def truncate(text: str, rng: random.Random) -> str:
    """The first 60-75 % of the words."""
    words = text.split()
    keep = max(1, round(len(words) * rng.uniform(0.6, 0.75)))
    return " ".join(words[:keep])


def boilerplate_only(text: str, rng: random.Random) -> str:
    """A different caption sharing only boilerplate with ``text``."""
    for prefix in BOILERPLATE_PREFIXES:
        if text.startswith(prefix):
            return prefix + content_caption(rng, held_out=True)
    if text.lower().startswith("image may contain"):
        return "Image may contain: " + ", ".join(rng.sample(TAGS, 3))
    return rng.choice(BOILERPLATE_PREFIXES) + content_caption(rng, held_out=True)


def plant(corpus: list[str], per_family: int, seed: int = 1) -> list[Planted]:
    """``per_family`` test captions of each family, derived from rows of ``corpus``."""
    rng = random.Random(seed)
    content = [
        i
        for i in rng.sample(range(len(corpus)), min(len(corpus), per_family * 12))
        if len(corpus[i].split()) >= 6 and not corpus[i].lower().startswith("image may")
    ]
    boiler = [
        i
        for i, text in enumerate(corpus)
        if text.startswith(BOILERPLATE_PREFIXES) or text.lower().startswith("image may contain")
    ]
    rules = {"exact": lambda t, r: t, "repunct": repunct, "reorder": reorder}
    rules |= {"synonym": synonym, "truncated": truncate}
    out: list[Planted] = []
    pos = 0
    for family, rule in rules.items():
        for i in content[pos : pos + per_family]:
            out.append(Planted(family, rule(corpus[i], rng), i))
        pos += per_family
    for i in rng.sample(boiler, min(per_family, len(boiler))):
        out.append(Planted("boilerplate", boilerplate_only(corpus[i], rng), -1))
    for _ in range(per_family):
        out.append(Planted("unrelated", content_caption(rng, held_out=True), -1))
    seen = set(corpus)
    while len([p for p in out if p.family == "chance"]) < per_family:
        text = content_caption(rng)
        if text not in seen:
            out.append(Planted("chance", text, -1))
    return out
