"""Split forms a new user tries first: a single image file, an ``hf://`` address shown as typed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import photo

import splitaudit
from splitaudit.indexer.errors import InputError, UsageError
from splitaudit.indexer.sources.hf_hub import hf_uri_text, resolve_hf_uri
from splitaudit.indexer.sources.open import open_split, split_location


def test_a_single_image_is_a_one_item_split(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in range(3):
        photo(seed, (96, 72)).save(corpus / f"{seed}.png")
    home = tmp_path / "home"
    splitaudit.index(corpus, corpus="c", home=home, embed=False, progress=False)
    single = tmp_path / "query.png"
    photo(1, (96, 72)).save(single)

    result = splitaudit.audit(single, corpus="c", home=home, progress=False)  # before: InputError
    assert [(i["key"], i["verdict"]) for i in result.items] == [("query.png", "exact")]
    assert result.items[0]["matches"][0]["corpus_key"] == "1.png"

    workdir = tmp_path / "work"
    workdir.mkdir()
    source = open_split(single, workdir=workdir)
    assert [r.key for shard in source.shards() for r in source.records(shard)] == ["query.png"]
    with pytest.raises(UsageError, match="single image"):
        split_location(single)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="or an image"):
        split_location(tmp_path / "notes.txt", workdir=workdir)


def test_hf_addresses_keep_their_two_slashes_in_messages(tmp_path: Path) -> None:
    folded = Path("hf://datasets/owner/name")  # what click's Path type hands over
    assert str(folded) == "hf:/datasets/owner/name"
    assert hf_uri_text(folded) == "hf://datasets/owner/name"
    assert hf_uri_text("data/test") == "data/test"
    with pytest.raises(InputError) as caught:
        resolve_hf_uri(folded, cache_dir=tmp_path, offline=True)
    assert str(caught.value).startswith("hf://datasets/owner/name: ")
    with pytest.raises(InputError, match=r"^hf://datasets/owner: expected"):
        resolve_hf_uri(Path("hf://datasets/owner"), cache_dir=tmp_path, offline=True)
