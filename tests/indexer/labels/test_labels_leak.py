"""Self-leak, match-leak and prevalence checks with their evidence."""

from __future__ import annotations

from collections import Counter

import pytest

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.labels.leak import LeakEvidence, label_prevalence, match_leak, self_leak
from splitaudit.indexer.labels.matcher import LabelMatcher
from splitaudit.indexer.labels.names import label_terms


@pytest.fixture
def matcher() -> LabelMatcher:
    names = {"n02123045": ["tabby", "tabby cat"], "3": ["three"], "n02084071": ["dog"]}
    return LabelMatcher(label_terms(["n02123045", "3", "n02084071", "tabby_cat"], names))


def _where(evidence: list[LeakEvidence]) -> list[tuple[str, str]]:
    return [(e.field, e.match) for e in evidence]


def test_self_leak_filename_path_fields_metadata_caption(matcher: LabelMatcher) -> None:
    key = "val/tabby/n02123045/n02123045_tabby_cat_0012.jpg"
    evidence = self_leak(
        key=key,
        label="n02123045",
        matcher=matcher,
        text_fields={
            "exif:ImageDescription": "My Tabby",
            "png:Comment": "a dog",
            "exif:UserComment": b"tabby",  # type: ignore[dict-item]
        },
        metadata={"title": "tabbies!", "size": 3, "tags": ["x", {"k": "TabbyCat"}]},
        caption="A tabby cat on a sofa",
    )
    assert _where(evidence) == [
        ("path", "tabby"),  # the class folder n02123045 itself is skipped, 'tabby' is not
        ("filename", "n02123045"),
        ("filename", "tabby_cat"),
        ("exif:ImageDescription", "Tabby"),
        ("metadata.title", "tabbies"),
        ("metadata.tags[1].k", "TabbyCat"),
        ("caption", "tabby cat"),
    ]
    for e in evidence[:3]:
        assert key[e.start : e.end] == e.match
    assert evidence[2].term == "tabby cat"


def test_self_leak_clean_item_and_imagefolder_class_folder(matcher: LabelMatcher) -> None:
    assert (
        self_leak(key="n02123045/ILSVRC2012_val_00000001.JPEG", label="n02123045", matcher=matcher)
        == []
    )
    assert self_leak(key="tabby_cat/0001.jpg", label="tabby_cat", matcher=matcher) == []
    # Another label's name in the path is not this item's leak.
    assert (
        self_leak(key="dog/0001.jpg", label="n02123045", matcher=matcher, caption="three dogs")
        == []
    )


def test_self_leak_numeric_label_only_through_names(matcher: LabelMatcher) -> None:
    evidence = self_leak(key="3/3_0001.jpg", label="3", matcher=matcher, caption="Three cats")
    assert _where(evidence) == [("caption", "Three")]


def test_match_leak_caption_key_url_tags(matcher: LabelMatcher) -> None:
    url = "https://tabby-cats.example.com/img/Tabby%20Cat_photo.jpg?q=tabby+cat#x"
    evidence = match_leak(
        label="n02123045",
        matcher=matcher,
        caption="Cute tabbies sleeping",
        key="shard-00001/000123456",
        url=url,
        metadata_tags=["cat", "Tabby"],
    )
    assert _where(evidence) == [
        ("caption", "tabbies"),
        ("url", "Tabby Cat"),  # decoded; the host 'tabby-cats.example.com' is not searched
        ("url", "tabby+cat"),
        ("tags[1]", "Tabby"),
    ]
    decoded = "https://tabby-cats.example.com/img/Tabby Cat_photo.jpg?q=tabby+cat#x"
    for e in evidence[1:3]:
        assert decoded[e.start : e.end] == e.match


def test_match_leak_key_fields_and_metadata_mapping(matcher: LabelMatcher) -> None:
    evidence = match_leak(
        label="n02123045",
        matcher=matcher,
        key="cats/tabby/IMG_1.jpg",
        metadata_tags={"tags": "pets, tabby"},
    )
    assert _where(evidence) == [("path", "tabby"), ("metadata.tags", "tabby")]
    assert match_leak(label="n02123045", matcher=matcher, key="tabby/tabby.jpg")[1].field == (
        "filename"
    )


def test_random_ids_and_data_urls_are_not_searched(matcher: LabelMatcher) -> None:
    assert (
        match_leak(label="n02084071", matcher=matcher, url="https://x.com/i/7aDogQz3Lp9.jpg") == []
    )
    assert (
        match_leak(label="n02084071", matcher=matcher, key="3fa85f6457174562dog3fc2c963f66afa6.jpg")
        == []
    )
    assert (
        match_leak(label="n02084071", matcher=matcher, url="data:image/png;base64,iVBORdogw0KGgo")
        == []
    )
    # Readable camelCase and WordNet ids still count.
    assert _where(
        match_leak(label="n02084071", matcher=matcher, url="https://x.com/BigDogPhoto.jpg")
    ) == [("url", "Dog")]


def test_no_substring_false_positives_in_evidence(matcher: LabelMatcher) -> None:
    assert (
        match_leak(
            label="n02084071",
            matcher=matcher,
            caption="hotdogs and dogma",
            key="dogecoin/underdog.jpg",
            metadata_tags=["dogged"],
        )
        == []
    )


def test_evidence_context_and_to_dict(matcher: LabelMatcher) -> None:
    caption = "x" * 40 + " a tabby cat " + "y" * 40
    (e,) = match_leak(label="n02123045", matcher=matcher, caption=caption)
    assert e.before == "…" + ("x" * 40 + " a ")[-30:]
    assert e.match == "tabby cat" == caption[e.start : e.end]
    assert e.after == (" " + "y" * 40)[:30] + "…"
    assert e.context == f"{e.before}[[tabby cat]]{e.after}"
    d = e.to_dict()
    assert d == {
        "field": "caption",
        "term": "tabby cat",
        "label": "n02123045",
        "start": 43,
        "end": 52,
        "before": e.before,
        "match": "tabby cat",
        "after": e.after,
        "context": e.context,
    }
    (short,) = match_leak(label="n02123045", matcher=matcher, caption="tabby")
    assert (short.before, short.after, short.context) == ("", "", "[[tabby]]")


def test_unknown_label_is_a_usage_error(matcher: LabelMatcher) -> None:
    with pytest.raises(UsageError):
        self_leak(key="a.jpg", label="nope", matcher=matcher)


def test_label_prevalence_counts_captions_not_mentions(matcher: LabelMatcher) -> None:
    captions = [
        "a tabby cat and another tabby",
        "three dogs",
        "TabbyCat",
        None,
        "",
        "category",
    ]
    assert label_prevalence(captions, matcher) == Counter(
        {"n02123045": 2, "tabby_cat": 2, "3": 1, "n02084071": 1}
    )
