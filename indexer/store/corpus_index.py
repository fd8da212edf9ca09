"""A corpus's FAISS stores, brought up to date with the DB on open (crash-safe catch-up).

Indexing only writes DB rows and vector batch files; the FAISS indexes are derived data.
``sync_corpus_index`` loads the saved indexes, adds whatever committed rows/batches are
newer than their sidecars, and saves them atomically. A run killed at any point therefore
never leaves the indexes missing or duplicating an item.
"""

from __future__ import annotations

import fcntl
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from indexer.db.models import Corpus, Item, VectorBatch
from indexer.errors import IndexMismatchError
from indexer.store import binary_index, float_index
from indexer.store.binary_index import BinaryStore, signed_to_unsigned
from indexer.store.float_index import FloatStore
from indexer.store.vectors import VECTORS_DIR, batch_path, read_batch

log = logging.getLogger(__name__)
_HASH_CHUNK = 200_000
ORPHAN_AGE_S = 3600.0


@dataclass
class CorpusIndex:
    """The loaded stores of one corpus (``floats`` is None for a hash-only corpus)."""

    corpus: str
    generation: int
    hashes: BinaryStore
    floats: FloatStore | None

    def info(self) -> dict[str, object]:
        """What a report records about the index used."""
        out: dict[str, object] = {
            "corpus": self.corpus,
            "generation": self.generation,
            "hash_count": self.hashes.count,
            "hash_index": self.hashes.index_type,
        }
        if self.floats is not None:
            out.update(vector_count=self.floats.count, vector_index=self.floats.index_type,
                       model_id=self.floats.model_id, dim=self.floats.dim)
        return out


@contextmanager
def corpus_lock(corpus_dir: Path) -> Iterator[None]:
    """An exclusive advisory lock so two processes never sync one corpus at once."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    with open(corpus_dir / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sync_corpus_index(session: Session, corpus: Corpus, corpus_dir: Path) -> CorpusIndex:
    """Load the corpus's stores, add committed rows newer than their sidecars, save if changed."""
    with corpus_lock(corpus_dir):
        hashes = _sync_hashes(session, corpus, corpus_dir)
        floats = _sync_floats(session, corpus, corpus_dir) if corpus.model_id else None
    return CorpusIndex(corpus=corpus.name, generation=corpus.generation, hashes=hashes, floats=floats)


def _check_generation(saved: int, corpus: Corpus, path: Path) -> None:
    if saved > corpus.generation:
        raise IndexMismatchError(
            f"{path} was built at generation {saved} but the database of corpus "
            f"{corpus.name!r} is at {corpus.generation}: it belongs to another database; "
            f"delete {path.parent} and run `splitaudit index` again"
        )


def _sync_hashes(session: Session, corpus: Corpus, folder: Path) -> BinaryStore:
    if (folder / binary_index.SIDECAR_FILE).exists():
        store = BinaryStore.load(folder)
        _check_generation(store.generation, corpus, folder / binary_index.SIDECAR_FILE)
    else:
        store = BinaryStore.create()
    last = store.max_item_id
    max_id = session.scalar(select(func.max(Item.id)).where(Item.corpus_id == corpus.id)) or 0
    added = 0
    while last < max_id:
        rows = session.execute(
            select(Item.id, Item.phash)
            .where(Item.corpus_id == corpus.id, Item.id > last, Item.phash.is_not(None))
            .order_by(Item.id)
            .limit(_HASH_CHUNK)
        ).all()
        if not rows:
            break
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        store.add(ids, signed_to_unsigned([r[1] for r in rows]))
        last = int(ids[-1])
        added += len(rows)
    if added or store.generation != corpus.generation or not (folder / binary_index.INDEX_FILE).exists():
        store.save(folder, generation=corpus.generation, max_item_id=max(max_id, store.max_item_id))
        log.info("hash index of %s: +%d (total %d)", corpus.name, added, store.count)
    return store


def _sync_floats(session: Session, corpus: Corpus, folder: Path) -> FloatStore:
    assert corpus.model_id is not None and corpus.embed_dim is not None
    if (folder / float_index.SIDECAR_FILE).exists():
        store = FloatStore.load(folder, model_id=corpus.model_id, dim=corpus.embed_dim)
        _check_generation(store.generation, corpus, folder / float_index.SIDECAR_FILE)
    else:
        store = FloatStore.create(model_id=corpus.model_id, dim=corpus.embed_dim)
    batches = session.execute(
        select(VectorBatch.id, VectorBatch.name)
        .where(VectorBatch.corpus_id == corpus.id, VectorBatch.id > store.last_batch_id)
        .order_by(VectorBatch.id)
    ).all()
    last = store.last_batch_id
    for batch_id, name in batches:
        ids, vecs = read_batch(batch_path(folder, name))
        store.add(ids, vecs)
        last = batch_id
    if batches or store.generation != corpus.generation or not (folder / float_index.INDEX_FILE).exists():
        store.save(folder, generation=corpus.generation, last_batch_id=last)
        log.info("vector index of %s: +%d batches (total %d)", corpus.name, len(batches), store.count)
    _remove_orphan_batches(session, corpus, folder)
    return store


def _remove_orphan_batches(session: Session, corpus: Corpus, folder: Path) -> None:
    """Delete batch files whose DB row was never committed (a run killed mid-batch)."""
    vec_dir = folder / VECTORS_DIR
    if not vec_dir.is_dir():
        return
    on_disk = {p.stem: p for p in vec_dir.glob("*.npz")}
    if not on_disk:
        return
    known = set(
        session.scalars(select(VectorBatch.name).where(VectorBatch.name.in_(list(on_disk)))).all()
    )
    cutoff = time.time() - ORPHAN_AGE_S
    for name, path in on_disk.items():
        # Young files may belong to a batch another process is committing right now.
        if name not in known and path.stat().st_mtime < cutoff:
            log.info("removing orphan vector batch %s", path)
            path.unlink(missing_ok=True)
