"""LabelMatcher: whole-word and phrase hits, false-positive traps, spans, stop-list."""

from __future__ import annotations

import re

import pytest

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.labels.matcher import LabelHit, LabelMatcher
from splitaudit.indexer.labels.names import label_terms


def _found(matcher: LabelMatcher, text: str) -> list[tuple[str, str]]:
    """(label, visible matched text) per hit; also checks every span against the text."""
    hits = matcher.find(text)
    for hit in hits:
        assert 0 <= hit.start < hit.end <= len(text)
    return [(h.label, text[h.start : h.end]) for h in hits]


@pytest.fixture
def matcher() -> LabelMatcher:
    return LabelMatcher(
        label_terms(
            ["cat", "ram", "n02123045", "tabby_cat", "3", "7"],
            {"n02123045": ["tabby", "tabby cat"], "3": ["three", "trois"]},
        )
    )


@pytest.mark.parametrize(
    "text",
    [
        "category",
        "concatenate",
        "catalog",
        "a catalogue of scattered cats-eye marbles",  # only the plural form 'cats' could hit
        "program",
        "programmer ramp cram",
        "bobcat wildcat",
        "tabbycat",  # no boundary between the words: not split
    ],
)
def test_no_substring_false_positives(matcher: LabelMatcher, text: str) -> None:
    assert [h for h in matcher.find(text) if h.label in ("ram", "n02123045")] == []
    found = [t for lab, t in _found(matcher, text) if lab == "cat"]
    assert found == (["cats"] if "cats-eye" in text else [])


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("tabby_cat_0012.jpg", "tabby_cat"),
        ("TabbyCat.png", "TabbyCat"),
        ("two tabby-cats", "tabby-cats"),
        ("TABBY CATS", "TABBY CATS"),
        ("Tabby, cat", "Tabby, cat"),  # phrases match across any separator
        ("ＴａｂｂｙＣａｔ", "ＴａｂｂｙＣａｔ"),
    ],
)
def test_multiword_label_matches_in_any_spelling(
    matcher: LabelMatcher, text: str, visible: str
) -> None:
    assert ("n02123045", visible) in _found(matcher, text)
    # Within one label, the shorter term inside the phrase is not reported again.
    assert [t for lab, t in _found(matcher, text) if lab == "n02123045"] == [visible]


def test_wordnet_id_matches_in_imagenet_file_name(matcher: LabelMatcher) -> None:
    text = "train/n02123045/n02123045_1234.JPEG"
    assert _found(matcher, text) == [("n02123045", "n02123045"), ("n02123045", "n02123045")]
    hits = matcher.find(text)
    assert [(h.start, h.end) for h in hits] == [(6, 15), (16, 25)]
    assert matcher.find("n021230451 xn02123045") == []


def test_numeric_id_is_not_a_term_but_its_names_are(matcher: LabelMatcher) -> None:
    assert matcher.terms("3") == ("three", "trois")
    assert matcher.find("3 cats in 2023, IMG_3.jpg") == [LabelHit("cat", "cat", 2, 6)]
    assert _found(matcher, "Three kittens") == [("3", "Three")]
    assert matcher.terms("7") == ()
    assert matcher.find_label("7 seas", "7") == []


def test_hit_fields_and_order() -> None:
    m = LabelMatcher({"dog": ["dog", "puppy"], "cat": ["cat"]})
    text = "Puppies chase a cat; the dog watches."
    assert m.find(text) == [
        LabelHit("dog", "puppy", 0, 7),
        LabelHit("cat", "cat", 16, 19),
        LabelHit("dog", "dog", 25, 28),
    ]
    assert m.find_label(text, "cat") == [LabelHit("cat", "cat", 16, 19)]
    assert m.mentions(text) == {"dog", "cat"}


def test_plural_and_singular_meet_both_ways() -> None:
    m = LabelMatcher({"box": ["boxes"], "puppy": ["puppy"], "bus": ["bus"], "glass": ["glass"]})
    assert _found(m, "a box, two puppies") == [("box", "box"), ("puppy", "puppies")]
    assert _found(m, "buses and glasses") == [("bus", "buses"), ("glass", "glasses")]
    assert _found(m, "bu glas") == []
    strict = LabelMatcher({"box": ["box"]}, plurals=False)
    assert strict.find("boxes") == []


def test_synonyms_of_different_labels_and_shared_terms() -> None:
    m = LabelMatcher({"n02124075": ["Egyptian cat", "cat"], "n02123045": ["tabby", "cat"]})
    text = "an Egyptian cat"
    assert _found(m, text) == [("n02124075", "Egyptian cat"), ("n02123045", "cat")]


def test_label_hits_overlapping_across_labels_are_all_kept() -> None:
    m = LabelMatcher({"sea lion": ["sea lion"], "lion": ["lion"], "sea": ["sea"]})
    assert sorted(_found(m, "a sea lion")) == [
        ("lion", "lion"),
        ("sea", "sea"),
        ("sea lion", "sea lion"),
    ]


@pytest.mark.parametrize(
    ("label", "text", "visible"),
    [
        ("café", "Le Café de Flore", "Café"),
        ("café", "CAFE\u0301_paris.jpg", "CAFE\u0301"),
        ("Müller", "MÜLLER-Lüdenscheidt", "MÜLLER"),
        ("ñandú", "Dos ñandú en la pampa", "ñandú"),
        ("Straße", "STRASSE", "STRASSE"),
        ("熊猫", "一只大熊猫在吃竹子", "熊猫"),
        ("ネコ", "かわいいネコの写真", "ネコ"),
        ("고양이", "고양이가 잔다", "고양이"),
    ],
)
def test_non_ascii_labels(label: str, text: str, visible: str) -> None:
    m = LabelMatcher({label: [label]})
    assert _found(m, text) == [(label, visible)]


def test_non_ascii_accents_are_not_folded() -> None:
    m = LabelMatcher({"café": ["café"]})
    assert m.find("cafe") == []


def test_cjk_matches_are_character_sequences() -> None:
    # Documented over-match: no word boundaries in Chinese, so 猫 (cat) is found in 熊猫 (panda).
    m = LabelMatcher({"猫": ["猫"]})
    assert _found(m, "熊猫") == [("猫", "猫")]


def test_stoplist_terms_are_skipped_but_phrases_kept() -> None:
    m = LabelMatcher({"the": ["the", "The Who"], "war": ["man of war"], "x": ["!!!"]})
    assert m.terms("the") == ("The Who",)
    assert m.skipped_terms == {"the": ("the",), "x": ("!!!",)}
    assert _found(m, "the man of war, the who") == [("war", "man of war"), ("the", "the who")]
    custom = LabelMatcher({"photo": ["photo"], "the": ["the"]}, stoplist=["photos"])
    assert custom.terms("photo") == ()
    assert _found(custom, "the photo") == [("the", "the")]


def test_unknown_label_and_bad_terms_raise_usage_error() -> None:
    m = LabelMatcher({"cat": ["cat"]})
    with pytest.raises(UsageError, match="not known"):
        m.find_label("cat", "dog")
    with pytest.raises(UsageError, match="list of strings"):
        LabelMatcher({"cat": "cat"})


def test_empty_matcher_and_empty_text() -> None:
    assert LabelMatcher({}).find("cat") == []
    assert LabelMatcher({"a": ["the"]}).find("the") == []
    m = LabelMatcher({"cat": ["cat"]})
    assert m.find("") == []
    assert m.find("!!! ---") == []
    assert m.mentions("") == set()


@pytest.mark.parametrize(
    "text",
    [
        "x\u0301 ＴＡＢＢＹ_ＣＡＴＳ ﬁ",
        "Ｔａｂｂｙ Ｃａｔ 𝐓𝐚𝐛𝐛𝐲 cat",
        "e\u0301e\u0301 tabby-cat",
    ],
)
def test_spans_map_back_to_the_original_text(matcher: LabelMatcher, text: str) -> None:
    hits = matcher.find_label(text, "n02123045")
    assert hits
    for hit in hits:
        visible = text[hit.start : hit.end]
        assert visible == visible.strip()
        assert re.sub(r"[\W_]+", " ", visible.casefold()).strip()
        # The visible text, matched on its own, gives the same hit.
        assert matcher.find_label(visible, "n02123045")[0].term == hit.term
