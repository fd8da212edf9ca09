"""Tokenizer: pinned tokens and keys, spans back into the original text, plural keys."""

from __future__ import annotations

import random

import pytest

from splitaudit.indexer.labels.normalize import (
    DEFAULT_STOPLIST,
    _tokenize_unicode,
    normalize_stoplist,
    singular,
    term_key,
    token_keys,
    token_spans,
    tokenize,
)


def _pairs(text: str) -> list[tuple[str, str]]:
    return [(t.key, text[t.start : t.end]) for t in tokenize(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tabby_cat_0012", [("tabby", "tabby"), ("cat", "cat"), ("0012", "0012")]),
        ("TabbyCat", [("tabby", "Tabby"), ("cat", "Cat")]),
        ("tabby-cats", [("tabby", "tabby"), ("cat", "cats")]),
        ("a.b/c\\d", [("a", "a"), ("b", "b"), ("c", "c"), ("d", "d")]),
        (
            "n02123045_1234.JPEG",
            [("n", "n"), ("02123045", "02123045"), ("1234", "1234"), ("jpeg", "JPEG")],
        ),
        ("HTMLParser", [("html", "HTML"), ("parser", "Parser")]),
        ("PDFs", [("pdf", "PDF"), ("s", "s")]),
        ("TABBY CATS", [("tabby", "TABBY"), ("cat", "CATS")]),
        ("cat2dog", [("cat", "cat"), ("2", "2"), ("dog", "dog")]),
        ("iPhone12Pro", [("i", "i"), ("phone", "Phone"), ("12", "12"), ("pro", "Pro")]),
        ("", []),
        ("--__..", []),
    ],
)
def test_ascii_tokens_pinned(text: str, expected: list[tuple[str, str]]) -> None:
    assert _pairs(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ＴａｂｂｙＣａｔ", [("tabby", "Ｔａｂｂｙ"), ("cat", "Ｃａｔ")]),  # full width -> NFKC
        ("Straße", [("strasse", "Straße")]),  # casefold, span still the original 6 chars
        ("İstanbul", [("istanbul", "İstanbul")]),
        ("CAFÉ Müller ñandú", [("café", "CAFÉ"), ("müller", "Müller"), ("ñandú", "ñandú")]),
        ("e\u0301cole_x", [("école", "e\u0301cole"), ("x", "x")]),  # decomposed input
        ("ﬁsh", [("fish", "ﬁsh")]),  # ligature expands, span is the one original char
        ("¼", [("1", "¼"), ("4", "¼")]),
        ("大熊猫", [("大", "大"), ("熊", "熊"), ("猫", "猫")]),  # no word boundaries: per char
        ("ネコ", [("ネ", "ネ"), ("コ", "コ")]),
        ("고양이", [("고", "고"), ("양", "양"), ("이", "이")]),
        ("cat猫", [("cat", "cat"), ("猫", "猫")]),
        ("Ελληνικές γάτες", [("ελληνικέσ", "Ελληνικές"), ("γάτεσ", "γάτες")]),  # final sigma
        ("кошка_Мурка", [("кошка", "кошка"), ("мурка", "Мурка")]),
        ("नमस्ते दुनिया", [("नमस्ते", "नमस्ते"), ("दुनिया", "दुनिया")]),  # marks stay in the word
    ],
)
def test_unicode_tokens_pinned(text: str, expected: list[tuple[str, str]]) -> None:
    assert _pairs(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A tabby_cat (2) sat on TabbyCats' HTMLParser; n02123045_1234.JPEG PDFs",
        "Photo: Boxes & puppies! glass bus IRIS x86_64 iPhone12ProMax",
        "PDFs HTMLs ABCsDEF A1b2C3 sS Ss SSs aSs",
        "",
        "___",
    ],
)
def test_ascii_fast_path_agrees_with_unicode_path(text: str) -> None:
    fast = tokenize(text)
    slow = _tokenize_unicode(text, True)
    assert fast == slow
    assert token_keys(text) == [t.key for t in slow]
    assert token_spans(text) == [(t.start, t.end) for t in slow]


def test_fast_path_agrees_on_random_ascii() -> None:
    rng = random.Random(0)
    alphabet = "abcsSXYZ019_-. "
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        assert tokenize(text) == _tokenize_unicode(text, True), text


@pytest.mark.parametrize(
    "text",
    ["Ｔａｂｂｙ_Ｃａｔ Straße", "x\u0301y ﬁ ¼ 大熊猫", "Müller-Lüdenscheidt", "ＡＢＣ１２３"],
)
def test_spans_are_ordered_and_inside_the_text(text: str) -> None:
    tokens = tokenize(text)
    assert tokens, text
    for tok in tokens:
        assert 0 <= tok.start < tok.end <= len(text)
        assert text[tok.start : tok.end].strip() == text[tok.start : tok.end]
    assert [t.start for t in tokens] == sorted(t.start for t in tokens)


@pytest.mark.parametrize(
    ("word", "key"),
    [
        ("cats", "cat"),
        ("cat", "cat"),
        ("boxes", "box"),
        ("foxes", "fox"),
        ("churches", "church"),
        ("dishes", "dish"),
        ("glasses", "glass"),
        ("tomatoes", "tomato"),
        ("puppies", "puppy"),
        ("puppy", "puppy"),
        ("horses", "horse"),
        ("houses", "house"),
        ("children", "child"),
        ("mice", "mouse"),
        ("wolves", "wolf"),
        ("shoes", "shoe"),
        ("buses", "bus"),
        ("emus", "emu"),
        ("dresses", "dress"),
        # Not plurals: unchanged.
        ("bus", "bus"),
        ("glass", "glass"),
        ("iris", "iris"),
        ("cactus", "cactus"),
        ("gas", "gas"),
        ("news", "news"),
        ("series", "series"),
        ("species", "species"),
        ("lens", "lens"),
        ("this", "this"),
        ("3s", "3s"),
    ],
)
def test_singular_pinned(word: str, key: str) -> None:
    assert singular(word) == key


@pytest.mark.parametrize(
    ("a", "b"),
    [("movie", "movies"), ("collie", "collies"), ("magpie", "magpies"), ("tie", "ties")],
)
def test_ie_words_and_their_plurals_share_a_key(a: str, b: str) -> None:
    assert singular(a) == singular(b)


def test_plurals_can_be_turned_off() -> None:
    assert [t.key for t in tokenize("Tabby-Cats", plurals=False)] == ["tabby", "cats"]
    assert term_key("Tabby-Cats", plurals=False) == "tabby cats"
    assert term_key("Tabby-Cats") == "tabby cat"


def test_stoplist_normalised_like_terms() -> None:
    stop = normalize_stoplist(["The", "Photos", "tabby_cat", "!!"])
    assert stop == frozenset({"the", "photo", "tabby cat"})
    assert {"the", "of", "jpg"} <= DEFAULT_STOPLIST
