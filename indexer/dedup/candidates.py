"""Which queried items can have a duplicate at all: the only ones dedup hands the audit engine.

After the self-joins (``pairs.join_corpus``) every search the engine will run for an item is
already answered in the join tables. An item none of whose tables holds another item (no
pHash within the radius, plain or mirrored; no hash k-NN candidate the candidate rule could
verify, ``knn_closed``; no vector neighbour at the floor cosine) and that shares no digest
with another item gets no pair from the engine: its row would be read from the database,
searched and classified for nothing. On ``bench.dedup``'s corpora (5% planted copies) that is ~92% of the items.

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
from splitaudit.indexer.dedup.pair_cosines import VectorChunks, pair_cosines
from splitaudit.indexer.dedup.pairs import MIRROR_MASK, Chunk
from splitaudit.indexer.match.pair_search import TOP_K
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.hamming_join import as_keys
from splitaudit.indexer.store.joined import JoinedFloats, JoinedHashes
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.sorted_lookup import member


def candidate_items(
    index: CorpusIndex,
    items: JoinItems,
    thresholds: Thresholds,
    grouped: Collection[int],
    vectors: VectorChunks | None = None,
) -> npt.NDArray[np.int64] | None:
    """The ids (sorted) of the queried ``items`` that may have a duplicate: another item in
    one of their join-table answers, or a digest shared with another (``grouped``). ``None``
    when ``index`` is not a joined one (every item must be searched). ``vectors`` (the
    corpus's (ids, vectors) chunks, streamed): a pHash k-NN answer counts only where the
    candidate rule could verify it (``knn_closed``)."""
    hashes = index.hashes
    if not isinstance(hashes, JoinedHashes) or hashes.radius != thresholds.phash_hamming:
        return None
    ids = items.ids
    keep = np.zeros(len(ids), bool)
    for q in (items.hashes, items.hashes ^ MIRROR_MASK):
        keep |= others_held(hashes.within, as_keys(q), ids, None, None)
    if thresholds.candidate_hamming > thresholds.phash_hamming and len(ids):
        if hashes.nearest is None or hashes.knn_k < TOP_K:
            keep[:] = True  # the engine asks the real store
        else:
            near = np.zeros(len(ids), bool)
            for q in (items.hashes, items.hashes ^ MIRROR_MASK):
                near |= others_held(
                    hashes.nearest, as_keys(q), ids, TOP_K, thresholds.candidate_hamming
                )
            if vectors is not None and index.floats is not None:
                closed = knn_closed(items, hashes.nearest, thresholds, vectors, index.floats.dim)
                near &= ~member(closed, ids)
            keep |= near
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
    rows, owner, flat = table.entries(keys, first)
    other = table.ids[flat] != own[owner]
    other &= table.ids[flat] >= 0
    if max_distance is not None:
        other &= np.asarray(table.scores[flat]) <= max_distance
    if min_cosine is not None:
        other &= np.asarray(table.scores[flat]) >= min_cosine
    found = np.zeros(len(keys), bool)
    found[owner[other]] = True
    return found | (rows < 0)


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


# The engine's cosine of a pair comes from the index (fp16 storage rounds it); a pair this
# close under the candidate cosine is left open.
COSINE_MARGIN = 1e-3
# Vectors held at once to score the k-NN pairs; past it every answered item stays open.
CLOSED_MAX_BYTES = 1 << 30


def knn_closed(
    items: JoinItems, nearest: Neighbours, thresholds: Thresholds, vectors: VectorChunks, dim: int
) -> npt.NDArray[np.int64]:
    """The queried items (sorted ids) whose pHash k-NN answers hold nothing the candidate rule
    could verify: each entry (the first ``TOP_K`` within ``candidate_hamming``, plain and
    mirrored, the item itself left out) a large pair of two embedded items at a cosine under
    ``candidate_cosine`` (and ``semantic_cosine``). Such a pair is neither a candidate nor
    semantic, nor near by its hash (one within the near radius is in the radius table, which
    keeps its item anyway), so the engine would classify it as nothing; an item with only such answers
    needs the engine for its other tables alone (``candidate_items``). Every item asks for its
    hash k-NN candidates, so without this every item with a neighbour within 20 bits (all of
    them in a corpus searched exhaustively) would go to the engine. ``vectors`` streams the
    corpus's (ids, vectors) chunks; only the rows of the pairs scored are held, and where they
    would pass ``CLOSED_MAX_BYTES`` nothing is closed (the engine decides, as before)."""
    ids = items.ids
    if not len(ids) or not len(nearest.ids):
        return np.zeros(0, np.int64)
    open_item = ~member(items.embedded, ids) | items.small
    owners: list[npt.NDArray[np.int64]] = []
    others: list[npt.NDArray[np.int64]] = []
    for q in (items.hashes, items.hashes ^ MIRROR_MASK):
        rows, owner, flat = nearest.entries(as_keys(q), TOP_K)
        open_item |= rows < 0  # not in the table: the engine asks the real store
        other = nearest.ids[flat]
        keep = (other != ids[owner]) & (other >= 0)
        keep &= np.asarray(nearest.scores[flat]) <= thresholds.candidate_hamming
        owners.append(owner[keep])
        others.append(other[keep])
    owner, other = np.concatenate(owners), np.concatenate(others)
    # a small or unembedded partner keeps the pair open
    partner_open = ~member(items.embedded, other) | member(items.small_ids, other)
    open_item[owner[partner_open]] = True
    scored = ~open_item[owner]
    owner, other = owner[scored], other[scored]
    if len(np.unique(np.r_[ids[owner], other])) * dim * 4 > CLOSED_MAX_BYTES:
        return np.zeros(0, np.int64)
    have, cos = pair_cosines(ids[owner], other, vectors)
    open_item[owner[~have]] = True  # a vector not found: the engine decides
    floor = min(thresholds.candidate_cosine, thresholds.semantic_cosine, thresholds.near_cosine)
    vouched = cos >= floor - COSINE_MARGIN
    open_item[owner[have][vouched]] = True
    return np.sort(ids[~open_item])
