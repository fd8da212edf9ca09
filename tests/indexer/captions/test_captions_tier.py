"""The caption tier: split items' captions (one or many) against a corpus, as FoundMatch rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from splitaudit.indexer.captions.sync import caption_index_dir
from splitaudit.indexer.captions.tier import CAPTION_KIND, caption_matches, split_item_captions
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Item, Split, SplitItem
from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
from splitaudit.indexer.workspace import Workspace

LEAKED = "Two kayakers paddle past the red lighthouse while gulls circle above the harbour wall"
OTHER = "A grey heron stands motionless in the shallow reeds at the edge of a frozen pond"


def test_captions_from_the_column_lists_lines_and_metadata() -> None:
    assert split_item_captions("a dog", None) == ["a dog"]
    assert split_item_captions(None, {}) == []
    assert split_item_captions('["a dog on a sofa", "a puppy asleep"]', None) == [
        "a dog on a sofa",
        "a puppy asleep",
    ]
    assert split_item_captions("['a dog', \"a cat's toy\"]", None) == ["a dog", "a cat's toy"]
    assert split_item_captions("first caption\nsecond caption", None) == [
        "first caption\nsecond caption",
        "first caption",
        "second caption",
    ]
    assert split_item_captions("one | two", None) == ["one | two", "one", "two"]
    meta = {
        "sentences": [{"raw": "a man rides a horse", "tokens": ["a"]}, {"raw": "a rider"}],
        "captions": ["a man rides a horse", " "],
        "alt_text": 7,  # not text: ignored
        "photographer": "a man rides a horse?",  # not a caption key
    }
    assert split_item_captions("[not a list", meta) == [
        "[not a list",
        "a man rides a horse",
        "a rider",
    ]


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace.open(tmp_path / "home")
    with transaction(workspace.sessions) as s:
        corpus = ensure_corpus(s, name="web", model_id=None, dim=None)
        shard = ensure_shard(s, corpus=corpus, source="gen", name="all")
        captions = [LEAKED.lower() + ".", OTHER, "Image may contain: 2 people, boat, water"]
        captions += [f"photo number {i} of a quiet street in the rain at night" for i in range(50)]
        for i, text in enumerate(captions):
            s.add(Item(corpus_id=corpus.id, shard_id=shard.id, key=f"c{i}", caption=text))
    return workspace


def _split(ws: Workspace, rows: list[tuple[str | None, dict[str, object]]]) -> list[int]:
    with transaction(ws.sessions) as s:
        split = Split(name="test")
        s.add(split)
        s.flush()
        items = [
            SplitItem(split_id=split.id, key=f"t{i}", caption=caption, meta=meta)
            for i, (caption, meta) in enumerate(rows)
        ]
        s.add_all(items)
        s.flush()
        return [it.id for it in items]


def test_a_planted_caption_copy_is_a_caption_match_with_its_evidence(ws: Workspace) -> None:
    ids = _split(
        ws,
        [
            (None, {"captions": ["a cat on a mat", LEAKED.replace("red", "crimson")]}),
            ("Image may contain: 2 people, boat, water", {}),  # boilerplate only
            ("a completely different sentence about a snowy mountain village", {}),
            (f'["{OTHER}", "{OTHER.upper()}"]', {}),
        ],
    )
    assert not caption_index_dir(ws, "web").exists()
    found = caption_matches(ws, ids, "web")  # syncs the corpus's caption index first
    assert caption_index_dir(ws, "web").exists()
    by_item = {m.split_item_id: m for m in found}
    assert set(by_item) == {ids[0], ids[3]}
    leak = by_item[ids[0]]
    assert leak.kind == CAPTION_KIND == "caption" and leak.corpus == "web"
    assert leak.cosine is None and leak.hamming is None
    assert leak.evidence["exact"] is False and leak.score == leak.evidence["jaccard"] >= 0.6
    assert leak.evidence["shared_span"] == "lighthouse while gulls circle above the harbour wall"
    assert leak.evidence["test_caption"] == LEAKED.replace("red", "crimson")
    assert leak.evidence["corpus_caption"] == LEAKED.lower() + "."
    assert by_item[ids[3]].evidence["exact"] is True  # two captions, one match
    assert len([m for m in found if m.split_item_id == ids[3]]) == 1
    row = leak.row(audit_id=9)
    assert row["kind"] == "caption" and row["item_id"] == leak.item_id


def test_split_without_captions_checks_nothing(ws: Workspace) -> None:
    ids = _split(ws, [(None, {}), ("", {"label": "cat"})])
    assert caption_matches(ws, ids, "web") == []
    assert not caption_index_dir(ws, "web").exists()  # nothing to look up: no index built
