"""Caption normalisation: case, Unicode, punctuation, whitespace, boilerplate phrases, shingles."""

from __future__ import annotations

import zlib

import numpy as np

from splitaudit.indexer.captions.normalize import (
    content_tokens,
    exact_key,
    normalize_caption,
    shingle_hashes,
    shingle_hashes_of,
    shingles,
    token_batch,
    token_hash,
    tokens,
)


def test_case_unicode_punctuation_and_whitespace_fold_to_the_same_words() -> None:
    variants = [
        "A red car, parked on the beach.",
        "a  RED car parked on the beach!!!",
        "Ａ ｒｅｄ ｃａｒ — parked\ton the\n beach...",  # full-width letters, em dash, tabs
        "a red-car parked on the beach",
    ]
    assert {normalize_caption(v) for v in variants} == {"a red car parked on the beach"}


def test_apostrophes_join_and_casefold_and_nfkc() -> None:
    assert tokens("The dog's ball, don’t touch") == ["the", "dogs", "ball", "dont", "touch"]
    assert tokens("STRASSE Straße ﬁsh") == ["strasse", "strasse", "fish"]
    assert tokens("café CAFÉ") == ["café", "café"]  # accents are kept
    assert tokens("") == [] and tokens(" ,;: ") == []


def test_scripts_without_spaces_give_one_token_per_character() -> None:
    assert tokens("一只熊猫在吃竹子") == ["一", "只", "熊", "猫", "在", "吃", "竹", "子"]
    assert tokens("panda 熊猫 2 pandas") == ["panda", "熊", "猫", "2", "pandas"]


def test_boilerplate_phrases_are_cut_before_shingling() -> None:
    assert content_tokens("Image may contain: person, dog") == ["person", "dog"]
    assert content_tokens("Stock Photo - a red car at dawn") == ["a", "red", "car", "at", "dawn"]
    assert content_tokens("royalty free stock photo of a kite") == ["a", "kite"]
    assert content_tokens("stock photo") == []
    # only whole phrases: "stock" alone is a word like any other
    assert content_tokens("a stock market crash") == ["a", "stock", "market", "crash"]


def test_shingles_are_word_bigrams_with_stable_hashes() -> None:
    assert shingles(["a", "red", "car"]) == [("a", "red"), ("red", "car")]
    assert shingles(["one"]) == []
    # a token hash is CRC-32 of its UTF-8 bytes: the same in every process and on every machine
    assert token_hash("cat") == zlib.crc32(b"cat") == 2656977832
    a = shingle_hashes(content_tokens("A red car, parked on the beach."))
    b = shingle_hashes(content_tokens("a red car parked on the beach"))
    assert len(a) == 6 and np.array_equal(a, b)
    pairs = shingles(content_tokens("a red car parked"))
    assert np.array_equal(
        np.sort(shingle_hashes_of(pairs)), shingle_hashes(["a", "red", "car", "parked"])
    )
    assert not np.intersect1d(a, shingle_hashes(["one", "blue", "boat", "near", "a", "lake"])).size


def test_token_batch_lengths_exact_keys_and_bigrams_never_span_captions() -> None:
    batch = token_batch(["A red car.", None, "", "a RED car", "stock photo", "red car a"])
    assert batch.lengths.tolist() == [3, 0, 0, 3, 0, 3]
    assert batch.exact[0] == batch.exact[3] == exact_key(["a", "red", "car"])
    assert batch.exact[5] != batch.exact[0]
    keys, owner = batch.shingles()
    assert owner.tolist() == [0, 0, 3, 3, 5, 5]  # "car" + "red" across captions is no bigram
    assert np.array_equal(keys[:2], keys[2:4])
