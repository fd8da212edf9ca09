"""The corpus items a dedup's self-joins query: ids, pHashes, which need hash k-NN, which are embedded.

One pass over the item rows, read as columns: the statement is built with SQLAlchemy and
run on the DB-API cursor (plain tuples: no ORM or Core row objects, no per-row type
processing; the short side is computed by the database), and the rows become arrays whole. Measured on ``bench.dedup``'s 1M-item corpus: the loop that
built Python lists row by row took ~7 CPU-s; this read takes ~1.5 (docs/dedup.md).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import and_, case, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Item
from splitaudit.indexer.dedup.db_rows import fetch_tuples
from splitaudit.indexer.store.binary_index import signed_to_unsigned
from splitaudit.indexer.store.hamming_mih import sorted_unique

UNKNOWN_SIDE = 10**6  # an image of unknown size is not small (as ``pairs.chunk_state``)


@dataclass(frozen=True)
class JoinItems:
    """The queried items (``ids`` aligned with ``hashes`` and ``small``) and every embedded id."""

    ids: npt.NDArray[np.int64]
    hashes: npt.NDArray[np.uint64]  # unsigned pHashes
    small: npt.NDArray[np.bool_]  # a small image (short side under ``small_side``)
    embedded: npt.NDArray[np.int64]  # every item with a vector, queried or not (sorted)
    # every small item with a pHash, queried or not (sorted; an exact copy left out of the
    # queries still answers them)
    small_ids: npt.NDArray[np.int64]


def read_join_items(
    session: Session, corpus_id: int, skip: Collection[int], *, small_side: int
) -> JoinItems:
    """The items with a pHash, minus ``skip`` (exact copies of a smaller id), in the database's
    row order, and every embedded one's id."""
    side = case(
        (
            and_(Item.width != 0, Item.height != 0),
            case((Item.width < Item.height, Item.width), else_=Item.height),
        ),
        else_=UNKNOWN_SIDE,
    )
    query = select(Item.id, Item.phash, side, Item.has_embedding).where(
        Item.corpus_id == corpus_id, Item.phash.is_not(None)
    )
    # plain tuples off the DB-API cursor, turned into an array whole (Core rows cost ~2x)
    parts = [np.array(rows, np.int64).reshape(-1, 4) for rows in fetch_tuples(session, query)]
    table = (np.concatenate(parts) if parts else np.zeros((0, 4), np.int64)).T
    ids, hashes, sides, embedded = table[0], table[1], table[2], table[3].astype(bool)
    queried = ~_isin(ids, skip)
    small = sides < small_side
    return JoinItems(
        ids=np.ascontiguousarray(ids[queried]),
        hashes=signed_to_unsigned(np.ascontiguousarray(hashes[queried])),
        small=np.ascontiguousarray(small[queried]),
        embedded=sorted_unique(ids[embedded]),
        small_ids=sorted_unique(ids[small]),
    )


def _isin(ids: npt.NDArray[np.int64], values: Collection[int]) -> npt.NDArray[np.bool_]:
    """Which ``ids`` are among ``values`` (a set of ints), by a sorted search."""
    if not len(values) or not len(ids):
        return np.zeros(len(ids), bool)
    wanted = np.sort(np.fromiter(values, np.int64, len(values)))
    pos = np.minimum(np.searchsorted(wanted, ids), len(wanted) - 1)
    return np.asarray(wanted[pos] == ids)
