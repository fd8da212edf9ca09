"""Tokenizer for label matching: NFKC, casefold, word/camelCase/digit splits, plurals, spans.

Rules (the same for label terms and for the text searched, so both sides meet):

- Unicode NFKC first (full-width ``ＣＡＴ`` -> ``CAT``, ligatures, compatibility digits), then
  each token is casefolded (``Straße`` -> ``strasse``; Turkish ``İ`` -> ``i``).
- Tokens are runs of letters and digits. Everything else separates: spaces, punctuation,
  underscores, hyphens, dots, slashes. A run is split further at camelCase boundaries
  (``tabbyCat`` -> ``tabby cat``; ``HTMLParser`` -> ``html parser``; ``PDFs`` -> ``pdf s``)
  and at letter/digit boundaries (``n02123045`` -> ``n 02123045``; ``cat2`` -> ``cat 2``).
  Combining marks stay with the character before them.
- Scripts written without spaces (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
  Myanmar) have no word boundaries to find, so each character (with its marks) is a token of
  its own. A term in those scripts then matches wherever its characters appear in sequence:
  ``熊猫`` matches in ``大熊猫很可爱``, and ``猫`` also matches inside ``熊猫`` (panda). That is
  substring semantics and can over-match; a word segmenter would be needed to do better.
- Accents are *not* folded: ``café`` matches ``Café`` and ``CAFÉ`` but not ``cafe`` (folding
  would merge distinct words, e.g. Spanish ``año``/``ano``, and strip marks that Indic
  scripts need).
- Plurals (English, simple): a token is reduced to a *matching key* by :func:`singular`
  (``cats`` -> ``cat``, ``boxes`` -> ``box``, ``puppies`` -> ``puppy``; ``bus``, ``glass``,
  ``iris`` unchanged). Keys are internal; hits always report the original text and term.
- Each token keeps its ``start``/``end`` in the *original* text, so ``text[start:end]`` is
  the visible characters the token came from (a compatibility character that NFKC expands,
  like ``¼``, gives every resulting token the span of that one character).

A stop-list names words that are never matched *as a whole term* (see
:class:`splitaudit.indexer.labels.matcher.LabelMatcher`); it does not remove words from the text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "DEFAULT_STOPLIST",
    "Token",
    "normalize_stoplist",
    "singular",
    "term_key",
    "token_keys",
    "token_spans",
    "tokenize",
]

# Shape characters: non-ASCII text is mapped char-by-char onto ASCII letters/digits plus these
# two private-use characters, so one regex splits ASCII text directly and any text via its shape.
_CONT = "\ue000"  # a character of a script written without spaces (one token each)
_MARK = "\ue001"  # a combining mark (belongs to the character before it)

_TOKEN_RE = re.compile(
    rf"(?:[A-Z]{_MARK}*)?[a-z][a-z{_MARK}]*"  # word, Word (marks attach)
    r"|[A-Z]{2,}(?=s(?![a-z]))"  # the PDF in PDFs
    rf"|[A-Z][A-Z{_MARK}]*(?![a-z])"  # ACRONYM (stops before the Capital of HTMLParser)
    rf"|[0-9][0-9{_MARK}]*"  # digits
    rf"|{_CONT}{_MARK}*"  # one CJK/Thai/... character
    rf"|{_MARK}+"  # marks with no base
)
# The same on ASCII text, which has no shape characters (the common, fast case).
# Alternatives reordered for speed (lower-case words first); they split exactly as above.
_ASCII_TOKEN_RE = re.compile(r"[a-z]+|[0-9]+|[A-Z][a-z]+|[A-Z]{2,}(?=s(?![a-z]))|[A-Z]+(?![a-z])")

# Scripts without spaces between words: Thai, Lao, Myanmar, Hangul Jamo, Khmer, CJK radicals,
# CJK symbols (々〆〇, 〡-〩), Hiragana/Katakana, Hangul compatibility Jamo, Katakana ext., CJK
# ext. A, CJK unified, Hangul Jamo ext., Hangul syllables, CJK compatibility, CJK ext. B-H.
_CONTINUOUS_RANGES = (
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1100, 0x11FF),
    (0x1780, 0x17FF),
    (0x2E80, 0x2FDF),
    (0x3005, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303B),
    (0x3040, 0x30FF),
    (0x3130, 0x318F),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0x20000, 0x323AF),
)

# Irregular plurals and -s words whose naive stem would collide or miss (word -> key).
_IRREGULAR = {
    "children": "child",
    "men": "man",
    "women": "woman",
    "people": "person",
    "mice": "mouse",
    "lice": "louse",
    "geese": "goose",
    "feet": "foot",
    "teeth": "tooth",
    "oxen": "ox",
    "dice": "die",
    "wolves": "wolf",
    "knives": "knife",
    "leaves": "leaf",
    "loaves": "loaf",
    "calves": "calf",
    "halves": "half",
    "shelves": "shelf",
    "wives": "wife",
    "lives": "life",
    "thieves": "thief",
    "scarves": "scarf",
    "hooves": "hoof",
    "elves": "elf",
    "dwarves": "dwarf",
    "buses": "bus",
    "gases": "gas",
    "lenses": "lens",
    "viruses": "virus",
    "cactuses": "cactus",
    "octopuses": "octopus",
    "walruses": "walrus",
    "platypuses": "platypus",
    "campuses": "campus",
    "circuses": "circus",
    "quizzes": "quiz",
    "emus": "emu",
    "gnus": "gnu",
    "menus": "menu",
    "gurus": "guru",
    "tutus": "tutu",
    "haikus": "haiku",
    "axes": "axe",
    "shoes": "shoe",
    "horseshoes": "horseshoe",
    "toes": "toe",
    "canoes": "canoe",
    "oboes": "oboe",
    "foes": "foe",
    "headaches": "headache",
    "mustaches": "mustache",
    "moustaches": "moustache",
    "avalanches": "avalanche",
    "niches": "niche",
    "caches": "cache",
}
# Words ending in -s that are not plurals of another word (kept as they are).
_INVARIANT = frozenset(
    {
        "news",
        "lens",
        "chaos",
        "atlas",
        "canvas",
        "christmas",
        "texas",
        "pancreas",
        "bias",
        "alias",
        "always",
        "perhaps",
        "whereas",
        "species",
        "series",
        "mathematics",
        "physics",
    }
)

# fmt: off
DEFAULT_STOPLIST: frozenset[str] = frozenset([
    # English function words: as a label term they would match almost every caption.
    "a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "for", "with", "by", "from",
    "as", "is", "it", "its", "be", "are", "was", "this", "that", "these", "those", "no", "not",
    # File-name and URL noise.
    "jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp", "img", "dsc", "dcim",
    "http", "https", "www", "com",
])
# fmt: on
"""Words never matched as a whole label term unless the caller passes its own stop-list."""


@dataclass(frozen=True, slots=True)
class Token:
    """One normalised token: its matching ``key`` and its span in the original text."""

    key: str
    start: int
    end: int


def singular(word: str) -> str:
    """Simple English singular of a lower-case word, used as a matching key.

    ``-ies``/``-ie`` -> ``-y`` (``puppies``, ``puppy`` -> ``puppy``; ``movies``, ``movie`` ->
    ``movy``: both forms meet on the key), ``-sses/-xes/-zzes/-ches/-shes/-oes`` drop ``es``,
    other ``-s`` drop ``s``; words ending in ``ss``, ``us``, ``is``, words under four letters,
    and a small exceptions list (irregular plurals, ``news``, ``lens``, ``series``...) are
    handled so that ``bus``, ``glass``, ``iris`` stay as they are.
    """
    if len(word) < 3 or not word.isalpha():
        return word
    irregular = _IRREGULAR.get(word)
    if irregular is not None:
        return irregular
    if word in _INVARIANT:
        return word
    if word.endswith("ies") and len(word) >= 4:
        return word[:-3] + "y"
    if word.endswith("ie"):
        return word[:-2] + "y"
    if len(word) < 4 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith(("sses", "xes", "zzes", "ches", "shes", "oes")):
        return word[:-2]
    return word[:-1]


@lru_cache(maxsize=1 << 16)
def _ascii_key_singular(raw: str) -> str:
    return singular(raw.lower())


def _ascii_key_plain(raw: str) -> str:
    return raw.lower()


def _unicode_key(raw: str, plurals: bool) -> str:
    if raw.isascii():
        key = raw.lower()
    else:
        # Casefold can leave non-NFKC text (and İ -> i + combining dot); normalise again.
        key = unicodedata.normalize("NFKC", raw.casefold()).replace("i\u0307", "i")
        if not key.isalnum():
            key = "".join(key.split())  # a key must never contain the matcher's separator
    return singular(key) if plurals else key


_SHAPE_CACHE: dict[str, str] = {}


def _shape_of(ch: str) -> str:
    """Map one character onto the tokenizer's shape alphabet."""
    shape = _SHAPE_CACHE.get(ch)
    if shape is not None:
        return shape
    if ch.isascii():
        shape = ch if ch.isalnum() else " "
    else:
        cat = unicodedata.category(ch)
        code = ord(ch)
        if cat[0] == "M":
            shape = _MARK
        elif cat == "Nd":
            shape = "0"
        elif cat[0] in "LN" and any(lo <= code <= hi for lo, hi in _CONTINUOUS_RANGES):
            shape = _CONT
        elif cat in ("Lu", "Lt"):
            shape = "A"
        elif cat[0] == "L" or cat in ("Nl", "No"):
            shape = "a"
        else:
            shape = " "
    _SHAPE_CACHE[ch] = shape
    return shape


def _nfkc_with_offsets(text: str) -> tuple[str, list[int] | None, list[int] | None]:
    """NFKC of ``text`` and, when it differs, maps from each normalised char to its source."""
    if unicodedata.is_normalized("NFKC", text):
        return text, None, None
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        # Normalise a base character together with its marks so that they compose.
        norm = unicodedata.normalize("NFKC", text[i:j])
        parts.append(norm)
        starts.extend([i] * len(norm))
        ends.extend([j] * len(norm))
        i = j
    return "".join(parts), starts, ends


def _tokenize_unicode(text: str, plurals: bool) -> list[Token]:
    norm, starts, ends = _nfkc_with_offsets(text)
    shape = "".join([_shape_of(ch) for ch in norm])
    tokens: list[Token] = []
    for m in _TOKEN_RE.finditer(shape):
        a, b = m.span()
        key = _unicode_key(norm[a:b], plurals)
        if starts is None or ends is None:
            tokens.append(Token(key, a, b))
        else:
            tokens.append(Token(key, starts[a], ends[b - 1]))
    return tokens


def tokenize(text: str, *, plurals: bool = True) -> list[Token]:
    """Split ``text`` into normalised tokens with spans in the original text."""
    if text.isascii():
        key = _ascii_key_singular if plurals else _ascii_key_plain
        return [Token(key(m.group()), m.start(), m.end()) for m in _ASCII_TOKEN_RE.finditer(text)]
    return _tokenize_unicode(text, plurals)


def token_keys(text: str, *, plurals: bool = True) -> list[str]:
    """Only the matching keys of :func:`tokenize` (the fast path, no spans)."""
    if text.isascii():
        key = _ascii_key_singular if plurals else _ascii_key_plain
        return list(map(key, _ASCII_TOKEN_RE.findall(text)))
    return [t.key for t in _tokenize_unicode(text, plurals)]


def token_spans(text: str) -> list[tuple[int, int]]:
    """Only the original-text spans of :func:`tokenize`, in the same order."""
    if text.isascii():
        return [m.span() for m in _ASCII_TOKEN_RE.finditer(text)]
    return [(t.start, t.end) for t in _tokenize_unicode(text, False)]


def term_key(term: str, *, plurals: bool = True) -> str:
    """The space-joined token keys of a label term (``"Tabby-Cats"`` -> ``"tabby cat"``)."""
    return " ".join(token_keys(term, plurals=plurals))


def normalize_stoplist(words: Iterable[str], *, plurals: bool = True) -> frozenset[str]:
    """Stop-list entries as matching keys (each entry normalised like a term)."""
    keys = {term_key(w, plurals=plurals) for w in words}
    keys.discard("")
    return frozenset(keys)
