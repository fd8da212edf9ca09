"""Keeping a corpus's caption index in step with its ``item.caption`` rows, and opening it.

``sync_caption_index`` reads the captions of items above the index's watermark (the highest item
id already read) in id order, a chunk at a time, and appends them; it commits a segment every
``SEGMENT_ROWS`` captions and at the end, so a killed sync resumes from its last commit and never
indexes an item twice. A file lock keeps two syncs of one corpus from interleaving.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import func, select

from splitaudit.indexer.captions.index import SEGMENT_ROWS, CaptionIndex, CaptionIndexWriter
from splitaudit.indexer.db.models import Item
from splitaudit.indexer.db.queries import get_corpus, in_chunks

if TYPE_CHECKING:
    from splitaudit.indexer.workspace import Workspace

__all__ = [
    "CAPTION_DIR",
    "CaptionSyncResult",
    "caption_index_dir",
    "caption_index_lag",
    "open_caption_index",
    "sync_caption_index",
]

log = logging.getLogger(__name__)
CAPTION_DIR = "captions"
READ_CHUNK = 50_000


@dataclass(frozen=True, slots=True)
class CaptionSyncResult:
    """What one sync did: rows read, captions now in the index, the new watermark."""

    read: int
    indexed: int
    max_item_id: int


def caption_index_dir(ws: Workspace, corpus: str) -> Path:
    """Folder of ``corpus``'s caption index (beside its FAISS stores)."""
    return ws.corpus_dir(corpus) / CAPTION_DIR


def sync_caption_index(
    ws: Workspace,
    corpus: str,
    *,
    chunk: int = READ_CHUNK,
    segment_rows: int = SEGMENT_ROWS,
    progress: Callable[[int], None] | None = None,
) -> CaptionSyncResult:
    """Append the captions of ``corpus`` items newer than the index's watermark; commit; return counts.

    Call it after an indexing run commits its items; it is cheap when nothing is new.
    ``progress(n)`` is called with the rows read after each chunk.
    """
    with ws.sessions() as s:
        corpus_id = get_corpus(s, name=corpus).id
    folder = caption_index_dir(ws, corpus)
    read = 0
    with _locked(folder):
        writer = CaptionIndexWriter(folder, corpus, segment_rows=segment_rows)
        before = writer.state.count
        watermark = writer.max_item_id
        while True:
            with ws.sessions() as s:
                rows = s.execute(
                    select(Item.id, Item.caption)
                    .where(Item.corpus_id == corpus_id, Item.id > watermark)
                    .order_by(Item.id)
                    .limit(chunk)
                ).all()
            if not rows:
                break
            ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            writer.add(ids, [r[1] for r in rows])
            watermark = int(ids[-1])
            read += len(rows)
            if progress is not None:
                progress(read)
            del rows
        writer.commit()
        indexed = writer.state.count - before
    log.info("caption index %s: read %d rows, %d captions indexed", corpus, read, indexed)
    return CaptionSyncResult(read=read, indexed=indexed, max_item_id=writer.state.max_item_id)


def open_caption_index(ws: Workspace, corpus: str) -> CaptionIndex:
    """Load ``corpus``'s caption index, fetching corpus captions for verification from the DB."""
    with ws.sessions() as s:
        corpus_id = get_corpus(s, name=corpus).id

    def texts(item_ids: Sequence[int]) -> Mapping[int, str]:
        out: dict[int, str] = {}
        with ws.sessions() as s:
            for part in in_chunks(list(item_ids)):
                for item_id, caption in s.execute(
                    select(Item.id, Item.caption).where(
                        Item.id.in_(part), Item.corpus_id == corpus_id
                    )
                ):
                    if caption:
                        out[int(item_id)] = caption
        return out

    return CaptionIndex.load(caption_index_dir(ws, corpus), corpus, texts)


def caption_index_lag(ws: Workspace, corpus: str) -> dict[str, Any]:
    """How far the caption index is behind the DB (for a status line): rows above the watermark."""
    folder = caption_index_dir(ws, corpus)
    index = CaptionIndex.load(folder, corpus, lambda _ids: {})
    with ws.sessions() as s:
        corpus_id = get_corpus(s, name=corpus).id
        behind = s.scalar(
            select(func.count())
            .select_from(Item)
            .where(Item.corpus_id == corpus_id, Item.id > index.state.max_item_id)
        )
    return {"indexed": index.state.count, "max_item_id": index.state.max_item_id, "behind": behind}


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` (one writer per caption index, across processes)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
