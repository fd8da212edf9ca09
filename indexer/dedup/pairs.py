"""Duplicate pairs within a corpus: one self-join of the whole corpus, then the audit engine per chunk.

Each chunk of corpus items is matched against the corpus's own stores exactly as a test split
is in an audit (``splitaudit.indexer.match.engine.match_corpus``: exact digests through the DB, pHash
radius and k-NN, vector k-NN candidates, pixel verification, the same ``Thresholds``),
so dedup uses the audit's tiers and picks up any change to the engine's decision.

The engine's searches are not run per item: ``join_corpus`` first answers them for every item
at once — a Hamming self-join of the hashes (multi-index hashing) and a vector self-join
(cell by cell through the IVF lists, ``store.vector_join``) — and the engine reads those
tables through stand-in stores (``store.joined``). Time grows ~linearly with the corpus
(docs/scale.md); only candidate pairs are verified.

Three things differ from a split:

* a corpus item has no stored mirrored pHash; its stand-in flips the bits of the odd
  horizontal DCT frequencies (mirroring negates exactly those coefficients, so this differs
  from the true mirrored hash only where the median moves: 4 bits typically, <= 10 for 99%
  of photos). Such a hit is a candidate the verifier (which searches mirrored alignments)
  confirms, or a pHash near match like the audit's mirrored pHash;
* an item that is an exact copy (same SHA-256, pixel or stream digest) of an item with a smaller id
  is not queried: its copy finds the same neighbours, and a blank placeholder repeated
  10,000 times would otherwise cost 10,000^2 pairs. Its cluster link is the exact edge;
* a pair the near rule calls a duplicate on its pHash alone, at more than
  ``WITNESS_HAMMING`` bits, needs a second witness when both items have embeddings: cosine
  >= ``candidate_cosine`` (the cosine at which the audit would nominate it for
  verification). A corpus is joined against itself, so it meets ~N^2/2 unrelated pairs,
  against N x M for an audit: on 1M uniform 64-bit hashes ~140 unrelated pairs (x2 with the
  mirrored hash) fall within 8 bits by chance, and real pHashes are far from uniform
  (docs/dedup.md, "Second witness"). Without embeddings the rule is the audit's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.by_id import rows_by_id
from splitaudit.indexer.db.models import Item, VectorBatch
from splitaudit.indexer.dedup.join_items import JoinItems, read_join_items
from splitaudit.indexer.dedup.pair_cosines import VectorChunks, pair_cosines
from splitaudit.indexer.dedup.phase_clock import PhaseClock
from splitaudit.indexer.dedup.self_joins import LocalSelfJoins
from splitaudit.indexer.kinds import KIND_RANK, MatchKind
from splitaudit.indexer.match.engine import TOP_K, match_corpus
from splitaudit.indexer.match.pair_search import DEDUP_SMALL_TOP_K, search_k
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.store.binary_index import signed_to_unsigned
from splitaudit.indexer.store.calibrate import iter_chunks
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.hamming_join import as_keys
from splitaudit.indexer.store.joined import JoinedFloats, JoinedHashes
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.store.sorted_lookup import member

if TYPE_CHECKING:
    from splitaudit.indexer.match.verify_store import VerifyStore

CHUNK_ROWS = 4096
WITNESS_HAMMING = 4  # uniform 64-bit hashes: ~0.04 chance pairs within 4 bits at 1M (with mirror)
_Num = TypeVar("_Num", int, float)


def _odd_column_mask() -> int:
    mask = 0
    for row in range(8):
        for col in (1, 3, 5, 7):
            mask |= 1 << (63 - (row * 8 + col))  # bits are row-major, first bit most significant
    return mask


MIRROR_MASK = np.uint64(_odd_column_mask())


@dataclass(frozen=True)
class Edge:
    """A duplicate pair of corpus items (``a < b``) with its evidence."""

    a: int
    b: int
    kind: str
    hamming: int | None = None
    cosine: float | None = None
    verify: float | None = None


@dataclass(frozen=True)
class Chunk:
    """Corpus item ids to query together, with their embeddings (rows aligned) if any."""

    ids: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32] | None


def exact_groups(session: Session, corpus_id: int) -> Iterator[list[int]]:
    """Item ids sharing a SHA-256, a pixel digest, then a stream digest (groups >= 2, ids sorted)."""
    for column in (Item.sha256, Item.pixel_digest, Item.stream_digest):
        dup_values = (
            select(column)
            .where(Item.corpus_id == corpus_id, column.is_not(None))
            .group_by(column)
            .having(func.count(Item.id) > 1)
            .subquery()
        )
        rows = session.execute(
            select(column, Item.id)
            .where(Item.corpus_id == corpus_id, column.in_(select(dup_values)))
            .order_by(column, Item.id)
        )
        current: str | None = None
        group: list[int] = []
        for value, item_id in rows:
            if value != current:
                if len(group) > 1:
                    yield group
                current, group = value, []
            group.append(int(item_id))
        if len(group) > 1:
            yield group


def iter_item_chunks(
    session: Session, corpus_id: int, corpus_dir: Path, *, has_vectors: bool, rows: int = CHUNK_ROWS
) -> Iterator[Chunk]:
    """Every item once: embedded ones in vector-batch order with their vectors, then the rest."""
    if has_vectors:
        refs = [
            (str(n), int(c))
            for n, c in session.execute(
                select(VectorBatch.name, VectorBatch.count)
                .where(VectorBatch.corpus_id == corpus_id)
                .order_by(VectorBatch.id)
            )
        ]
        for ids, vectors in iter_chunks(corpus_dir, refs, min_rows=rows):
            for start in range(
                0, len(ids), rows
            ):  # a large batch file: bounded chunks all the same
                yield Chunk(
                    np.asarray(ids[start : start + rows], np.int64),
                    np.ascontiguousarray(vectors[start : start + rows], np.float32),
                )
    last = -1
    while True:
        query = select(Item.id).where(Item.corpus_id == corpus_id, Item.id > last)
        if has_vectors:
            query = query.where(Item.has_embedding.is_(False))
        found = [int(i) for i in session.scalars(query.order_by(Item.id).limit(rows))]
        if not found:
            return
        last = found[-1]
        yield Chunk(np.asarray(found, np.int64), None)


def chunk_state(
    session: Session, ids: Sequence[int], skip: set[int], grouped: set[int] | None = None
) -> tuple[SplitState, list[int]]:
    """The engine's query arrays for corpus items ``ids`` (minus ``skip`` and unhashed ones).

    ``grouped``: every item sharing a digest with another (``exact_groups``); the others'
    digests are left out, since the engine's digest lookup could only find the item itself
    (it would cost one DB lookup per item for nothing). Returns the state and the positions
    in ``ids`` its rows come from.
    """
    rows: dict[
        int, tuple[str | None, str | None, int, int | None, int | None, str, str | None]
    ] = {}
    wanted = [i for i in ids if i not in skip]
    columns = [
        Item.sha256,
        Item.pixel_digest,
        Item.phash,
        Item.width,
        Item.height,
        Item.key,
        Item.stream_digest,
    ]
    for item_id, sha, pixel, phash, w, h, key, stream in rows_by_id(
        session, columns, wanted, where=[Item.phash.is_not(None)]
    ):
        rows[int(item_id)] = (sha, pixel, int(phash or 0), w, h, key, stream)
    positions = [n for n, i in enumerate(ids) if int(i) in rows]
    if grouped is not None:
        for i in rows.keys() - grouped:
            rows[i] = (None, None, *rows[i][2:6], None)
    picked = [rows[int(ids[n])] for n in positions]
    hashes = signed_to_unsigned([r[2] for r in picked]) if picked else np.zeros(0, np.uint64)
    sides = [min(r[3], r[4]) if r[3] and r[4] else 10**6 for r in picked]
    state = SplitState(
        ids=np.asarray([int(ids[n]) for n in positions], np.int64),
        keys=[r[5] for r in picked],
        labels=[None] * len(picked),
        # A missing digest must match nothing: "" is never stored as a digest.
        sha256=[r[0] or "" for r in picked],
        pixel=[r[1] or "" for r in picked],
        stream=[r[6] or "" for r in picked],
        phash=np.asarray(hashes, np.uint64),
        phash_mirror=np.asarray(hashes, np.uint64) ^ MIRROR_MASK,
        min_side=np.asarray(sides, np.int32),
        # Not used by match_corpus (it re-decodes queries it verifies); empty, so a use fails loudly.
        thumbs=np.zeros((0, 32, 32), np.uint8),
    )
    return state, positions


def chunk_edges(
    session: Session,
    *,
    corpus_id: int,
    index: CorpusIndex,
    chunk: Chunk,
    skip: set[int],
    thresholds: Thresholds,
    semantic: bool,
    store: VerifyStore | None = None,
    grouped: set[int] | None = None,
    clock: PhaseClock | None = None,
) -> list[Edge]:
    """The duplicate pairs between the items of ``chunk`` and the whole corpus (self pairs dropped);
    ``store`` keeps the candidates' verification features between runs; ``grouped``: see
    ``chunk_state``; ``clock``: counts the DB read (``chunk_read``) and the engine (``engine``)."""
    clock = clock or PhaseClock()
    with clock.phase("chunk_read"):
        state, positions = chunk_state(session, chunk.ids.tolist(), skip, grouped)
    if not len(state):
        return []
    vectors = chunk.vectors[positions] if chunk.vectors is not None else None
    if vectors is not None and isinstance(index.floats, JoinedFloats):
        index.floats.expect(state.ids, vectors)
    if isinstance(index.hashes, JoinedHashes):
        index.hashes.expect(state.ids, [state.phash, state.phash_mirror])
    with clock.phase("engine"):
        found = match_corpus(
            session,
            corpus_id=corpus_id,
            index=index,
            state=state,
            vectors=vectors,
            thresholds=thresholds,
            query_model=Item,
            store=store,
        )
    witness = index.hashes.witness if isinstance(index.hashes, JoinedHashes) else {}
    out: list[Edge] = []
    for p in found.pairs:
        own = int(state.ids[p.row])
        if p.item_id == own or p.kind is None:
            continue
        a, b = (own, p.item_id) if own < p.item_id else (p.item_id, own)
        kind: str | None = p.kind
        cosine = p.cosine
        if kind == MatchKind.NEAR and needs_witness(p.rules, p.hamming):
            cosine = cosine if cosine is not None else witness.get((a, b))
            if cosine is not None and cosine < thresholds.candidate_cosine:
                # the pHash alone, and the embeddings disagree: judged as if the hash tier
                # had not fired (semantic, or nothing)
                kind = thresholds.classify(None, cosine, p.verify, p.min_side, None)
        if kind is None or (kind == MatchKind.SEMANTIC and not semantic):
            continue
        out.append(Edge(a, b, kind, p.hamming, cosine, p.verify))
    return out


def needs_witness(rules: Sequence[str], hamming: int | None) -> bool:
    """Whether a near pair rests on its pHash alone at more than ``WITNESS_HAMMING`` bits."""
    return list(rules) == ["phash"] and hamming is not None and hamming > WITNESS_HAMMING


def witness_cosines(
    ids: npt.NDArray[np.int64],
    hashes: npt.NDArray[np.uint64],
    within: Neighbours,
    embedded: npt.NDArray[np.int64],
    vectors: VectorChunks,
) -> dict[tuple[int, int], float]:
    """Cosine of every pair of embedded items whose pHashes (plain or mirrored) lie within the
    join radius but more than ``WITNESS_HAMMING`` bits apart: the pairs ``needs_witness`` asks
    about, found once for the corpus. ``within``: the Hamming radius join keyed by hash value;
    ``embedded``: the ids with a vector (sorted); ``vectors``: streams (ids, vectors) chunks.
    One pass over the vectors, holding only the rows of those pairs."""
    if not len(within.ids) or not len(ids):
        return {}
    a_parts: list[npt.NDArray[np.int64]] = []
    b_parts: list[npt.NDArray[np.int64]] = []
    for q in (hashes, hashes ^ MIRROR_MASK):
        _pos, rows, flat = within.entries(as_keys(q))
        far = np.asarray(within.scores[flat]) > WITNESS_HAMMING
        a, b = ids[rows[far]], within.ids[flat[far]]
        a_parts.append(np.minimum(a, b)[a != b])
        b_parts.append(np.maximum(a, b)[a != b])
    a, b = np.concatenate(a_parts), np.concatenate(b_parts)
    both = member(embedded, a) & member(embedded, b)
    pairs = np.unique(np.stack([a[both], b[both]], axis=1), axis=0) if both.any() else None
    if pairs is None:
        return {}
    have, cos = pair_cosines(pairs[:, 0], pairs[:, 1], vectors)
    pairs = pairs[have]
    return {
        (int(x), int(y)): float(c)
        for x, y, c in zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), cos.tolist(), strict=True)
    }


def vector_batches(session: Session, corpus_id: int) -> list[tuple[str, int]]:
    """The corpus's vector batch files (name, count) in the order they were written."""
    return [
        (str(n), int(c))
        for n, c in session.execute(
            select(VectorBatch.name, VectorBatch.count)
            .where(VectorBatch.corpus_id == corpus_id)
            .order_by(VectorBatch.id)
        )
    ]


def join_corpus(
    session: Session,
    *,
    corpus_id: int,
    corpus_dir: Path,
    index: CorpusIndex,
    thresholds: Thresholds,
    skip: set[int],
    progress: Callable[[str], None] | None = None,
    clock: PhaseClock | None = None,
    joins: LocalSelfJoins | None = None,
    items: JoinItems | None = None,
) -> tuple[CorpusIndex, dict[str, Any]]:
    """The corpus index with its searches answered by one self-join of every queried item.

    Returns the stand-in index ``chunk_edges`` hands the engine, and what the joins did;
    ``clock`` counts each join's CPU (``items_read``, ``hash_joins`` (radius and k-NN),
    ``witness``, ``vector_join``); ``joins``: who runs the joins (default: this process;
    ``sharded_join.ShardedSelfJoins``: shards, e.g. on Ray, with the same tables);
    ``items``: the queried items as ``join_items.read_join_items`` reads them (read here if
    not given).
    """
    say = progress or (lambda _m: None)
    clock = clock or PhaseClock()
    joins = joins or LocalSelfJoins()
    has_vectors = index.floats is not None and index.floats.count > 0
    if items is None:
        with clock.phase("items_read"):
            items = read_join_items(session, corpus_id, skip, small_side=thresholds.small_side)
    ids, hashes, embedded = items.ids, items.hashes, items.embedded
    stats: dict[str, Any] = {"queried": len(ids)}
    say(f"joining {len(ids)} hashes")
    queries = np.r_[hashes, hashes ^ MIRROR_MASK]
    mirror = int(MIRROR_MASK)  # both halves answered by self-joins of the store
    nearest = None
    with clock.phase("hash_joins"):
        if thresholds.candidate_hamming > thresholds.phash_hamming and len(ids):
            within, nearest = joins.hash_tables(
                index.hashes,
                queries,
                thresholds.phash_hamming,
                TOP_K,
                thresholds.candidate_hamming,
                mirror=mirror,
            )
        else:
            within = joins.hash_radius(
                index.hashes, queries, thresholds.phash_hamming, mirror=mirror
            )
    stats["hash_pairs"] = within.pairs + (nearest.pairs if nearest is not None else 0)
    refs = vector_batches(session, corpus_id) if has_vectors else []
    witness: dict[tuple[int, int], float] = {}
    if has_vectors and thresholds.phash_hamming > WITNESS_HAMMING:
        with clock.phase("witness"):
            witness = witness_cosines(
                ids, hashes, within, embedded, lambda: iter_chunks(corpus_dir, refs)
            )
        stats["witness_pairs"] = len(witness)
    joined_hashes = JoinedHashes(
        index.hashes,
        radius=thresholds.phash_hamming,
        within=within,
        knn_k=TOP_K,
        nearest=nearest,
        witness=witness,
    )
    floats = index.floats
    if floats is not None and has_vectors:
        say(f"joining {floats.count} vectors")
        floor = min(thresholds.semantic_cosine, thresholds.near_cosine, thresholds.candidate_cosine)
        # small images get their DEDUP_SMALL_TOP_K nearest as candidates (as the engine asks
        # in a dedup): the join runs at that k when the corpus has any, and the other items'
        # rows are cut back to TOP_K, so the engine's wider searches are answered from the
        # table, not searched again
        wide = np.sort(ids[items.small])
        k = search_k(items.small, small_k=DEDUP_SMALL_TOP_K)
        with clock.phase("vector_join"):
            table, report = joins.vectors(
                floats, corpus_dir, refs, k=k, floor=floor, cosine=thresholds.near_cosine
            )
            if k > TOP_K:
                table = table.trimmed(TOP_K, wider=wide, wide_k=k)
        stats["vector_join"] = {
            **report.to_dict(),
            "pairs": table.pairs,
            "k": k,
            "small_items": len(wide),
        }
        floats = JoinedFloats(floats, table=table, k=k, floor=floor)
    joined = CorpusIndex(
        corpus=index.corpus, generation=index.generation, hashes=joined_hashes, floats=floats
    )
    return joined, stats


def merge_edges(edges: Iterable[Edge]) -> dict[tuple[int, int], Edge]:
    """One edge per pair: the strongest kind, with the best evidence either direction found."""
    out: dict[tuple[int, int], Edge] = {}
    for e in edges:
        old = out.get((e.a, e.b))
        if old is None:
            out[(e.a, e.b)] = e
            continue
        out[(e.a, e.b)] = Edge(
            e.a,
            e.b,
            min(old.kind, e.kind, key=KIND_RANK.__getitem__),
            _best(old.hamming, e.hamming, min),
            _best(old.cosine, e.cosine, max),
            _best(old.verify, e.verify, max),
        )
    return out


def _best(x: _Num | None, y: _Num | None, pick: Callable[[_Num, _Num], _Num]) -> _Num | None:
    if x is None:
        return y
    if y is None:
        return x
    return pick(x, y)
