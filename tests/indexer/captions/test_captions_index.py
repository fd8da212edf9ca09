"""The persistent caption index: incremental sync from the DB, restarts, damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from splitaudit.indexer.captions.index import SIDECAR, CaptionIndex, CaptionIndexWriter
from splitaudit.indexer.captions.query import find_caption_matches
from splitaudit.indexer.captions.sync import (
    caption_index_dir,
    caption_index_lag,
    open_caption_index,
    sync_caption_index,
)
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Item
from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
from splitaudit.indexer.errors import IndexMismatchError, NotFoundError
from splitaudit.indexer.workspace import Workspace

SUBJECTS = [
    "heron",
    "otter",
    "kestrel",
    "badger",
    "lynx",
    "marten",
    "stoat",
    "curlew",
    "plover",
    "egret",
]
PLACES = [
    "jetty",
    "marsh",
    "quarry",
    "orchard",
    "glacier",
    "canyon",
    "harbour",
    "meadow",
    "chapel",
    "lagoon",
]


def caption(i: int) -> str:
    """A distinct caption per ``i`` (its numbers are the informative part in a big corpus)."""
    a, b, c = SUBJECTS[i % 10], PLACES[(i // 10) % 10], SUBJECTS[(i // 100) % 10]
    return f"a {a} resting near the {b} while a {c} watches from item {i} of batch {i * 7 + 3}"


def add_items(ws: Workspace, start: int, stop: int, corpus: str = "web") -> None:
    with transaction(ws.sessions) as s:
        row = ensure_corpus(s, name=corpus, model_id=None, dim=None)
        shard = ensure_shard(s, corpus=row, source="gen", name="all")
        for i in range(start, stop):
            text = caption(i) if i % 7 else None  # some items have no caption
            s.add(Item(corpus_id=row.id, shard_id=shard.id, key=f"k{i}", caption=text))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "home")


def _indexed_ids(ws: Workspace) -> list[int]:
    index = open_caption_index(ws, "web")
    return sorted(int(i) for seg in index.segments for i in seg.ids)


def test_sync_adds_only_new_rows_and_a_second_sync_reads_nothing(ws: Workspace) -> None:
    add_items(ws, 0, 300)
    first = sync_caption_index(ws, "web", chunk=64)
    assert first.read == 300 and first.indexed == 300 - len(range(0, 300, 7))
    sidecar = caption_index_dir(ws, "web") / SIDECAR
    generation = json.loads(sidecar.read_text())["generation"]
    assert sync_caption_index(ws, "web").read == 0
    assert json.loads(sidecar.read_text())["generation"] == generation  # nothing rewritten
    add_items(ws, 300, 400)
    second = sync_caption_index(ws, "web", chunk=64)
    assert second.read == 100 and second.indexed == 100 - len(range(300, 400, 7))
    with ws.sessions() as s:
        want = sorted(s.scalars(select(Item.id).where(Item.caption.is_not(None))))
    assert _indexed_ids(ws) == want  # every captioned item exactly once
    assert caption_index_lag(ws, "web")["behind"] == 0
    index = open_caption_index(ws, "web")
    hits = find_caption_matches(index, [(1, caption(351).upper() + "!")])
    assert (hits[0].kind, hits[0].corpus_caption) == ("exact", caption(351))
    committed = json.loads(sidecar.read_text())
    assert committed["max_item_id"] == max(want) + (0 if 399 % 7 else 1)
    assert committed["count"] == len(want)


def test_a_killed_sync_resumes_from_its_last_commit(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_items(ws, 0, 1000)
    calls = {"n": 0}
    real_add = CaptionIndexWriter.add

    def dying_add(self: CaptionIndexWriter, ids: np.ndarray, texts: list[str | None]) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # after three chunks of 100 (one segment of 200 committed)
            raise KeyboardInterrupt
        real_add(self, ids, texts)

    monkeypatch.setattr(CaptionIndexWriter, "add", dying_add)
    with pytest.raises(KeyboardInterrupt):
        sync_caption_index(ws, "web", chunk=100, segment_rows=200)
    monkeypatch.setattr(CaptionIndexWriter, "add", real_add)
    folder = caption_index_dir(ws, "web")
    committed = json.loads((folder / SIDECAR).read_text())
    assert 0 < committed["max_item_id"] < 1000
    (folder / "seg-999999.ids.npy").write_bytes(b"left by a killed run")
    resumed = sync_caption_index(ws, "web", chunk=100, segment_rows=200)
    assert resumed.read == 1000 - committed["max_item_id"]  # nothing read twice
    with ws.sessions() as s:
        want = sorted(s.scalars(select(Item.id).where(Item.caption.is_not(None))))
    assert _indexed_ids(ws) == want
    assert not (folder / "seg-999999.ids.npy").exists()


def test_many_small_syncs_are_merged_into_few_segments(ws: Workspace) -> None:
    for start in range(0, 600, 50):
        add_items(ws, start, start + 50)
        sync_caption_index(ws, "web")
    index = open_caption_index(ws, "web")
    assert len(index.segments) <= 9
    with ws.sessions() as s:
        want = sorted(s.scalars(select(Item.id).where(Item.caption.is_not(None))))
    assert _indexed_ids(ws) == want
    hits = find_caption_matches(index, [(1, caption(10)), (2, caption(590))])
    assert {h.corpus_caption for h in hits} == {caption(10), caption(590)}


def test_unknown_corpus_and_damaged_index_say_what_to_do(ws: Workspace) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        sync_caption_index(ws, "nope")
    add_items(ws, 0, 50)
    sync_caption_index(ws, "web")
    folder = caption_index_dir(ws, "web")
    sidecar = json.loads((folder / SIDECAR).read_text())
    (folder / SIDECAR).write_text(json.dumps(dict(sidecar, boilerplate_version=0)))
    with pytest.raises(IndexMismatchError, match="rebuild"):
        open_caption_index(ws, "web")
    (folder / SIDECAR).write_text(json.dumps(sidecar))
    seg = sidecar["segments"][0]["name"]
    (folder / f"{seg}.sig.npy").write_bytes(b"garbage")
    with pytest.raises(IndexMismatchError, match="delete the folder"):
        open_caption_index(ws, "web")
    (folder / SIDECAR).write_text("{not json")
    with pytest.raises(IndexMismatchError, match="unreadable"):
        CaptionIndex.load(folder, "web", lambda ids: {})


def test_an_index_of_another_corpus_is_refused(tmp_path: Path) -> None:
    writer = CaptionIndexWriter(tmp_path, "one")
    writer.add(np.arange(1, 3, dtype=np.int64), [caption(1), caption(2)])
    writer.commit()
    with pytest.raises(IndexMismatchError, match="belongs to corpus 'one'"):
        CaptionIndex.load(tmp_path, "two", lambda ids: {})
