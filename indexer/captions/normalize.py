"""Caption normalisation: NFKC, casefold, punctuation and whitespace out; word tokens and word shingles.

Both sides of a caption comparison (corpus and test) go through the same steps:

1. Unicode NFKC then casefold (``ＣＡＴ`` -> ``cat``, ``Straße`` -> ``strasse``); accents stay.
2. Apostrophes inside words are dropped (``dog's`` -> ``dogs``, ``don't`` -> ``dont``); every
   other non-letter, non-digit character separates words (punctuation, symbols, ``_``, dashes).
3. Scripts written without spaces (Han, Hiragana, Katakana, Thai) give one token per character,
   so a Chinese caption is compared character by character instead of as one giant "word".
4. Boilerplate phrases (:data:`BOILERPLATE_PHRASES`: ``image may contain``, ``stock photo``, ...)
   are cut out of the token list (:func:`content_tokens`): they say nothing about the image and
   must never make a match on their own. The list is versioned (:data:`BOILERPLATE_VERSION`)
   because a persisted caption index is built over it.

Shingles are word bigrams (:data:`SHINGLE_WORDS`), hashed to stable 64-bit integers (no
per-process salt, so a saved index stays valid): a token is CRC-32 of its UTF-8 bytes and a
shingle mixes its tokens' hashes (:func:`shingle_hashes`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "BOILERPLATE_PHRASES",
    "BOILERPLATE_VERSION",
    "SHINGLE_WORDS",
    "TokenBatch",
    "content_tokens",
    "exact_key",
    "normalize_caption",
    "shingle_hashes",
    "shingle_hashes_of",
    "shingles",
    "token_batch",
    "token_hash",
    "tokens",
]

SHINGLE_WORDS = 2
MAX_CAPTION_CHARS = 10_000
# Bump when the phrase list changes: a persisted caption index records the version it used.
BOILERPLATE_VERSION = 1
# Normalised phrases cut out before shingling (longest first wins at one position). They come
# from alt-text conventions (social-network auto alt text, stock sites, CLIP prompt templates).
BOILERPLATE_PHRASES: tuple[str, ...] = (
    "image may contain",
    "photo may contain",
    "may contain",
    "no photo description available",
    "stock photo",
    "stock photos",
    "stock photography",
    "stock image",
    "stock images",
    "stock picture",
    "stock pictures",
    "stock vector",
    "royalty free",
    "royalty free stock",
    "free stock",
    "free download",
    "hd wallpaper",
    "high resolution",
    "high quality",
    "close up",
    "a photo of",
    "a picture of",
    "an image of",
    "photo of",
    "picture of",
    "image of",
)

_APOSTROPHE = re.compile(r"(?<=\w)['’ʼ`´](?=\w)")
# One token: a character of a script written without spaces, or a run of other letters/digits.
_NO_SPACE = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_NO_SPACE}]|[^\W_{_NO_SPACE}]+")
_PHRASES: dict[str, list[tuple[str, ...]]] = {}
for _p in sorted(BOILERPLATE_PHRASES, key=lambda p: -len(p.split())):
    _words = tuple(_p.split())
    _PHRASES.setdefault(_words[0], []).append(_words)

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def normalize_caption(text: str) -> str:
    """``text`` normalised for comparison: NFKC, casefold, words separated by single spaces."""
    return " ".join(tokens(text))


def tokens(text: str) -> list[str]:
    """The normalised word tokens of ``text`` (boilerplate phrases kept; only its first
    ``MAX_CAPTION_CHARS`` characters: a longer "caption" is a document, not alt-text)."""
    text = text[:MAX_CAPTION_CHARS]
    if text.isascii():  # NFKC leaves ASCII alone and casefold is lower (the common case, fast)
        folded = text.lower()
        if "'" in folded or "`" in folded:
            folded = _APOSTROPHE.sub("", folded)
        return _TOKEN.findall(folded)
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TOKEN.findall(_APOSTROPHE.sub("", folded))


def content_tokens(text: str) -> list[str]:
    """The normalised tokens of ``text`` with boilerplate phrases cut out."""
    words = tokens(text)
    if not words:
        return words
    out: list[str] = []
    i, n = 0, len(words)
    while i < n:
        cut = 0
        for phrase in _PHRASES.get(words[i], ()):
            k = len(phrase)
            if tuple(words[i : i + k]) == phrase:
                cut = k
                break
        if cut:
            i += cut
        else:
            out.append(words[i])
            i += 1
    return out


def shingles(words: Sequence[str], size: int = SHINGLE_WORDS) -> list[tuple[str, ...]]:
    """The word ``size``-grams of ``words`` in order (none when there are fewer words)."""
    return [tuple(words[i : i + size]) for i in range(len(words) - size + 1)]


def token_hash(word: str) -> int:
    """A stable 32-bit hash of one token (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(word.encode("utf-8", "surrogatepass"))


def mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64's finaliser: spreads every input bit over the whole 64-bit word."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x & _MASK64


def bigram_keys(
    token_hashes: npt.NDArray[np.uint64], owner: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Hashes of the word bigrams in flat token arrays (``owner[i]``: caption of token ``i``).

    Returns the shingle hashes and, for each, its caption; a bigram never spans two captions.
    """
    if len(token_hashes) < 2:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    same = owner[1:] == owner[:-1]
    left = token_hashes[:-1][same]
    right = token_hashes[1:][same]
    keys = mix64((left << np.uint64(32)) | right)
    return keys, owner[:-1][same]


def shingle_hashes_of(pairs: Iterable[tuple[str, str]]) -> npt.NDArray[np.uint64]:
    """The hashes of given word bigrams (as :func:`shingle_hashes` computes them)."""
    pairs = list(pairs)
    left = np.fromiter((_memo_hash(a) for a, _ in pairs), np.uint64, len(pairs))
    right = np.fromiter((_memo_hash(b) for _, b in pairs), np.uint64, len(pairs))
    return mix64((left << np.uint64(32)) | right)


def shingle_hashes(words: Sequence[str]) -> npt.NDArray[np.uint64]:
    """The distinct bigram shingle hashes of one token list (as the index computes them)."""
    th = np.fromiter((token_hash(w) for w in words), np.uint64, len(words))
    keys, _ = bigram_keys(th, np.zeros(len(words), np.int64))
    return np.unique(keys)


# Token -> hash memo: captions repeat a small vocabulary, and a dict hit is cheaper than CRC-32.
_TOKEN_MEMO: dict[str, int] = {}
_TOKEN_MEMO_MAX = 2_000_000


@dataclass(frozen=True, slots=True)
class TokenBatch:
    """Content tokens of a batch of captions as flat arrays (what signatures are built from).

    ``token_hashes[i]`` belongs to caption ``owner[i]``; ``lengths[c]`` is caption ``c``'s token
    count; ``exact[c]`` is a 64-bit hash of its normalised content text (equal text, equal hash).
    """

    token_hashes: npt.NDArray[np.uint64]
    owner: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int32]
    exact: npt.NDArray[np.uint64]

    def __len__(self) -> int:
        return len(self.lengths)

    def shingles(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Bigram shingle hashes of the batch and the caption each belongs to."""
        return bigram_keys(self.token_hashes, self.owner)


def _memo_hash(word: str) -> int:
    h = _TOKEN_MEMO.get(word)
    if h is None:
        if len(_TOKEN_MEMO) > _TOKEN_MEMO_MAX:
            _TOKEN_MEMO.clear()
        h = _TOKEN_MEMO[word] = token_hash(word)
    return h


def token_batch(texts: Sequence[str | None]) -> TokenBatch:
    """Tokenise a batch of captions (``None`` counts as empty) into a :class:`TokenBatch`."""
    memo = _TOKEN_MEMO
    if len(memo) > _TOKEN_MEMO_MAX:
        memo.clear()
    flat: list[int] = []
    lengths = np.zeros(len(texts), np.int32)
    exact = np.zeros(len(texts), np.uint64)
    for c, text in enumerate(texts):
        words = content_tokens(text) if text else []
        lengths[c] = len(words)
        for w in words:
            h = memo.get(w)
            if h is None:
                h = memo[w] = token_hash(w)
            flat.append(h)
        if words:
            exact[c] = exact_key(words)
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    return TokenBatch(np.array(flat, np.uint64), owner, lengths, exact)


def exact_key(words: Sequence[str]) -> int:
    """A 64-bit hash of normalised content text (what "exact after normalisation" compares)."""
    digest = hashlib.blake2b(" ".join(words).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "little")
