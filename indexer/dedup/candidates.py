"""Which queried items can have a duplicate at all: the only ones dedup hands the audit engine.

After the self-joins (``pairs.join_corpus``) every search the engine will run for an item is
already answered in the join tables. An item none of whose tables holds another item (no
pHash within the radius, plain or mirrored; no hash k-NN candidate where it asks for one; no
vector neighbour at the floor cosine) and that shares no digest with another item gets no
pair from the engine: its row would be read from the database, searched and classified for
nothing. On ``bench.dedup``'s corpora (5% planted copies) that is ~92% of the items.

The test mirrors the stand-in stores (``store.joined``) exactly: the entries they would
return for the item, minus the item itself; where a table does not hold the query (the
engine would fall through to the real store), or the thresholds differ from the joined
ones, the item is kept. So the edges are the same with and without this step.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.dedup.join_items import JoinItems
from splitaudit.indexer.dedup.pairs import MIRROR_MASK, Chunk
from splitaudit.indexer.match.pair_search import TOP_K
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.hamming_join import as_keys
from splitaudit.indexer.store.joined import JoinedFloats, JoinedHashes
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.sorted_lookup import member


def candidate_items(
    index: CorpusIndex, items: JoinItems, thresholds: Thresholds, grouped: Collection[int]
) -> npt.NDArray[np.int64] | None:
    """The ids (sorted) of the queried ``items`` that may have a duplicate: another item in
    one of their join-table answers, or a digest shared with another (``grouped``). ``None``
    when ``index`` is not a joined one (every item must be searched)."""
    hashes = index.hashes
    if not isinstance(hashes, JoinedHashes) or hashes.radius != thresholds.phash_hamming:
        return None
    ids = items.ids
    keep = np.zeros(len(ids), bool)
    for q in (items.hashes, items.hashes ^ MIRROR_MASK):
        keep |= others_held(hashes.within, as_keys(q), ids, None, None)
    if thresholds.candidate_hamming > thresholds.phash_hamming and len(ids):
        for q in (items.hashes, items.hashes ^ MIRROR_MASK):
            if hashes.nearest is None or hashes.knn_k < TOP_K:
                keep[:] = True  # the engine asks the real store
                break
            keep |= others_held(
                hashes.nearest, as_keys(q), ids, TOP_K, thresholds.candidate_hamming
            )
    embedded = member(items.embedded, ids)
    floats = index.floats
    if floats is not None and embedded.any():
        if not isinstance(floats, JoinedFloats) or floats.k < TOP_K:
            keep |= embedded
        else:
            floor = min(
                thresholds.semantic_cosine, thresholds.near_cosine, thresholds.candidate_cosine
            )
            rows = np.flatnonzero(embedded)
            keep[rows] |= others_held(floats.table, ids[rows], ids[rows], TOP_K, None, floor)
    if len(grouped):
        keep |= member(np.sort(np.fromiter(grouped, np.int64, len(grouped))), ids)
    return np.sort(ids[keep])


def others_held(
    table: Neighbours,
    keys: npt.NDArray[np.int64],
    own: npt.NDArray[np.int64],
    first: int | None,
    max_distance: int | None,
    min_cosine: float | None = None,
) -> npt.NDArray[np.bool_]:
    """Per query key, whether its table answer (the ``first`` entries; within ``max_distance``
    or at ``min_cosine`` and above) holds an id other than ``own``; True where the table does
    not hold the key (the stand-in would ask the real store)."""
    rows = table.rows(keys)
    held = rows >= 0
    start = np.where(held, table.offsets[np.maximum(rows, 0)], 0)
    counts = np.where(held, table.offsets[np.maximum(rows, 0) + 1] - start, 0)
    if first is not None:
        counts = np.minimum(counts, first)
    owner = np.repeat(np.arange(len(keys)), counts)
    flat = np.repeat(start - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(len(owner))
    other = table.ids[flat] != own[owner]
    other &= table.ids[flat] >= 0
    if max_distance is not None:
        other &= np.asarray(table.scores[flat]) <= max_distance
    if min_cosine is not None:
        other &= np.asarray(table.scores[flat]) >= min_cosine
    found = np.zeros(len(keys), bool)
    found[owner[other]] = True
    return found | ~held


def keep_candidates(
    chunks: Iterator[tuple[int, Chunk]], candidates: npt.NDArray[np.int64] | None
) -> Iterator[tuple[int, Chunk]]:
    """The numbered chunks with only their ``candidates`` rows (all rows when ``None``); a
    chunk left empty still comes (its number is the unit a killed run resumes at)."""
    for n, chunk in chunks:
        if candidates is None:
            yield n, chunk
            continue
        mask = member(candidates, chunk.ids)
        vectors = chunk.vectors[mask] if chunk.vectors is not None else None
        yield n, Chunk(chunk.ids[mask], vectors)
