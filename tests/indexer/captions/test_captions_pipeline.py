"""The caption tier over what the real pipeline stores: a folder corpus with caption sidecars,
a manifest split whose caption cell holds a list, a local audit, then the tier (the audit hook)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.audit.service import run_audit, submit_audit
from splitaudit.indexer.captions.sync import sync_caption_index
from splitaudit.indexer.captions.tier import caption_matches
from splitaudit.indexer.db.models import Audit, Item, SplitItem
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace

LEAKED = "A red double-decker bus crossing Westminster Bridge in heavy rain at dusk"
CORPUS_CAPTIONS = [
    "Image may contain: 1 person, outdoor",
    LEAKED,
    "stock photo",
    "A fisherman mending blue nets on a wooden pier beside three moored boats",
]


def test_a_caption_copy_in_a_sidecar_is_found_for_a_manifest_split(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, text in enumerate(CORPUS_CAPTIONS):
        photo(i).save(corpus / f"img{i}.jpg", quality=90)
        (corpus / f"img{i}.txt").write_text(text, encoding="utf-8")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "web", [FolderSource(corpus)], embedder=None)
    # ``index`` synced the caption index already (3 captions: "stock photo" has no shingle left)
    assert sync_caption_index(ws, "web").indexed == 0

    split = tmp_path / "split"
    split.mkdir()
    rows = [
        ("t0.jpg", json.dumps(["a cat asleep on a sofa", LEAKED.replace("heavy ", "")])),
        ("t1.jpg", "Image may contain: 1 person, outdoor"),
        ("t2.jpg", "a quiet mountain village under fresh snow at sunrise"),
    ]
    with open(split / "manifest.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["path", "caption"])
        for n, (name, caption) in enumerate(rows):
            photo(100 + n).save(split / name, quality=90)  # other photos: no image match
            writer.writerow([name, caption])
    audit_id = submit_audit(ws, split_uri=str(split / "manifest.csv"), name="t", corpora=["web"])
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        split_id = s.get_one(Audit, audit_id).split_id
        ids = {
            key: i
            for i, key in s.execute(
                select(SplitItem.id, SplitItem.key).where(SplitItem.split_id == split_id)
            )
        }
        leaked_item = s.scalar(select(Item.id).where(Item.key == "img1.jpg"))

    found = caption_matches(ws, sorted(ids.values()), "web")
    assert [(m.split_item_id, m.item_id, m.kind) for m in found] == [
        (ids["t0.jpg"], leaked_item, "caption")
    ]
    assert (
        found[0].evidence["shared_span"] == "a red double decker bus crossing westminster bridge in"
    )
    assert found[0].evidence["corpus_caption"] == LEAKED
