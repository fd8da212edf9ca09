"""The shape descriptors of a corpus's thumbnails (``features.shape``), searched exhaustively.

Kept beside the hash index as one file (``shapes.npz``: item ids, float16 descriptors, the
corpus generation and the highest item id read), brought up to date from the DB's
``Item.shape`` column on open the way the hash index is (items are only ever appended, so the
rows past the highest id read are the new ones). Only corpus images under ``MAX_SIDE`` px
(``features.shape``) keep a descriptor, so the store holds a corpus's thumbnails, not its
photos: 256 bytes each (a million thumbnails: 244 MiB on disk and in RAM). The search is exact
(``store.exact``: numpy blocks, one BLAS thread per block): a small test image against a
million thumbnails costs ~5 ms CPU (``bench.shape_search``; FAISS's ``IndexFlatIP`` was 1.8x
faster there, over float32 rows: twice the RAM).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Corpus, Item
from splitaudit.indexer.db.queries import item_values_after, max_item_id
from splitaudit.indexer.db.shape_blob import DTYPE, SHAPE_DIM, from_bytes
from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store.atomic import atomic_write_bytes
from splitaudit.indexer.store.exact import exact_search

log = logging.getLogger(__name__)
SHAPES_FILE = "shapes.npz"
FORMAT = 1
_CHUNK = 100_000  # DB rows read at once


class ShapeStore:
    """Item ids and their shape descriptors (float16 rows, ``SHAPE_DIM`` wide)."""

    def __init__(
        self,
        ids: npt.NDArray[np.int64] | None = None,
        vectors: npt.NDArray[np.float16] | None = None,
        *,
        generation: int = 0,
        max_item_id: int = 0,
    ) -> None:
        self.ids = np.zeros(0, np.int64) if ids is None else np.asarray(ids, np.int64)
        self.vectors = (
            np.zeros((0, SHAPE_DIM), DTYPE) if vectors is None else np.asarray(vectors, DTYPE)
        )
        if self.vectors.shape != (len(self.ids), SHAPE_DIM):
            raise ValueError(
                f"{len(self.ids)} ids need ({len(self.ids)}, {SHAPE_DIM}) descriptors, "
                f"got {self.vectors.shape}"
            )
        self.generation = generation
        self.max_item_id = max_item_id

    @property
    def count(self) -> int:
        return len(self.ids)

    def add(self, ids: npt.NDArray[np.int64], vectors: npt.NDArray[np.floating]) -> None:
        """Append descriptors of items ``ids`` (higher than any held)."""
        self.ids = np.concatenate([self.ids, np.asarray(ids, np.int64)])
        self.vectors = np.concatenate([self.vectors, np.asarray(vectors, DTYPE)])

    def search(
        self, queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """The ``k`` most similar descriptors of each query row, best first: ``(scores, ids)``
        of shape ``(n, k)``; id -1 (score -inf) where the store holds fewer than ``k``."""
        q = np.asarray(queries, np.float32)
        if self.count == 0 or k <= 0:
            return (
                np.full((len(q), max(k, 0)), -np.inf, np.float32),
                np.full((len(q), max(k, 0)), -1, np.int64),
            )
        return exact_search(q, self.vectors, self.ids, k)

    def save(self, folder: Path) -> None:
        """Write the store atomically (``folder / SHAPES_FILE``)."""
        buf = io.BytesIO()
        np.savez(
            buf,
            format=np.int64(FORMAT),
            ids=self.ids,
            vectors=self.vectors,
            generation=np.int64(self.generation),
            max_item_id=np.int64(self.max_item_id),
        )
        atomic_write_bytes(folder / SHAPES_FILE, buf.getvalue())

    @classmethod
    def load(cls, folder: Path) -> ShapeStore:
        """Read ``folder / SHAPES_FILE`` (``IndexMismatchError`` when it cannot be read)."""
        path = folder / SHAPES_FILE
        try:
            with np.load(path) as data:
                if int(data["format"]) != FORMAT:
                    raise IndexMismatchError(f"{path} has format {int(data['format'])}")
                return cls(
                    data["ids"],
                    data["vectors"],
                    generation=int(data["generation"]),
                    max_item_id=int(data["max_item_id"]),
                )
        except IndexMismatchError:
            raise
        except (OSError, KeyError, ValueError, EOFError) as exc:
            raise IndexMismatchError(f"{path} cannot be read ({exc})") from exc


def load_shapes(folder: Path) -> ShapeStore | None:
    """The saved shape store of a corpus folder (synced by whoever opened the index), or None
    where there is none or it cannot be read (no shape search then)."""
    try:
        return ShapeStore.load(folder) if (folder / SHAPES_FILE).exists() else None
    except IndexMismatchError as exc:
        log.warning("%s; no shape search", exc)
        return None


def sync_shapes(session: Session, corpus: Corpus, folder: Path) -> ShapeStore:
    """The corpus's shape store, with the DB's rows newer than the saved file added (saved
    again when it changed); rebuilt from the DB when the file is missing, unreadable or from
    another database (a generation ahead of the DB's)."""
    path = folder / SHAPES_FILE
    store = ShapeStore()
    if path.exists():
        try:
            store = ShapeStore.load(folder)
        except IndexMismatchError as exc:
            log.warning("%s; rebuilding the shape descriptors from the database", exc)
        if store.generation > corpus.generation:
            log.warning(
                "%s was built at generation %d, the database is at %d: rebuilt",
                path,
                store.generation,
                corpus.generation,
            )
            store = ShapeStore()
    max_id = max_item_id(session, corpus.id)
    new_ids: list[npt.NDArray[np.int64]] = []
    new_vectors: list[npt.NDArray[np.float32]] = []
    for rows in item_values_after(
        session, corpus.id, Item.shape, store.max_item_id, max_id, _CHUNK
    ):
        new_ids.append(np.fromiter((r[0] for r in rows), np.int64, len(rows)))
        new_vectors.append(from_bytes([bytes(r[1] or b"") for r in rows]))  # never None (SQL)
    added = sum(len(i) for i in new_ids)
    if added:  # one concatenation, not one per chunk
        store.add(np.concatenate(new_ids), np.concatenate(new_vectors))
    changed = added or store.max_item_id != max(max_id, store.max_item_id)
    store.max_item_id = max(max_id, store.max_item_id)
    if changed or store.generation != corpus.generation or not path.exists():
        store.generation = corpus.generation
        store.save(folder)
        if added:
            log.info("shape descriptors of %s: +%d (total %d)", corpus.name, added, store.count)
    return store
