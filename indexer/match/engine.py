"""Matching a split against one corpus: exact, near and semantic candidates, verified and classified.

The orchestration: the tiers of ``pair_search``, the orientation of small pairs
(``small_pairs``), the verification pass (``verify_pass``), then ``pair.classify_all``."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session
from threadpoolctl import threadpool_limits

from splitaudit.indexer.db.models import Item, SplitItem
from splitaudit.indexer.match.found import DuplicatePair
from splitaudit.indexer.match.geometric_tier import GeometricTier
from splitaudit.indexer.match.pair import CorpusMatches, Pair, classify_all
from splitaudit.indexer.match.pair_search import (
    DEDUP_SMALL_TOP_K,
    SMALL_TOP_K,
    TOP_K,
    exact_pairs,
    exact_search,
    fill_cosines,
    fill_min_sides,
    hash_pairs,
    region_pairs,
    rows_by_value,
    shape_pairs,
    small_rows,
    vector_pairs,
)
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.small_pairs import turn_small_pairs, verified_orientation
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.match.verify_pass import verify_candidates
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.corpus_index import CorpusIndex

if TYPE_CHECKING:
    from splitaudit.indexer.match.content_region import Embed
    from splitaudit.indexer.match.inset_candidates import RegionVectors
    from splitaudit.indexer.match.verify_store import VerifyStore


def match_corpus(
    session: Session,
    *,
    corpus_id: int,
    index: CorpusIndex,
    state: SplitState,
    vectors: npt.NDArray[np.float32] | None,
    thresholds: Thresholds,
    query_model: type[SplitItem] | type[Item] = SplitItem,
    phases: PhaseTimes | None = None,
    store: VerifyStore | None = None,
    on_verify: Callable[[int, int], None] | None = None,
    regions: RegionVectors | None = None,
    content_embed: Embed | None = None,
) -> CorpusMatches:
    """Find and classify every pair of split item x corpus item that is a duplicate of some kind.

    ``regions``: embeddings of regions of the large test images by the same model as
    ``vectors`` (``state.regions[model]``), which nominate insets for the geometric step.
    ``content_embed``: that model's embedder (``Embedder.embed``); with it, a pair whose
    geometric fit was refused as an overlay is semantic only if its content region embeds close
    too (``splitaudit.indexer.match.content_region``); without it, by its cosine as before.

    ``on_verify(done, total)`` hears the verification step's progress (test images with
    candidates to verify): the long phase of a large audit.

    ``state.ids`` are rows of ``query_model``: split items, or corpus items when a corpus is
    matched against itself (``splitaudit.indexer.dedup``). ``store`` keeps corpus images' verification
    features between audits (``splitaudit.indexer.match.verify_store``; the same results either way).
    """
    started = time.perf_counter()
    phases = phases or PhaseTimes()
    pairs: dict[tuple[int, int], Pair] = {}
    # A corpus matched against itself asks every pair from both of its sides: a small item's
    # wider embedding search is narrower there, and small pairs are aligned one way round.
    both_sides = query_model is Item

    def pair(row: int, item_id: int) -> Pair:
        key = (row, item_id)
        if key not in pairs:
            pairs[key] = Pair(row=row, item_id=item_id)
        return pairs[key]

    with phases.phase("exact (db)"):
        exact_pairs(session, corpus_id, state, pair)
    with phases.phase("hash search"):
        hash_pairs(index.hashes, state, thresholds, pair)
    embedded = vectors is not None and index.floats is not None and len(vectors) > 0
    if embedded:
        assert vectors is not None and index.floats is not None
        with phases.phase("vector search"):
            wide = small_rows(state, thresholds)
            vector_pairs(
                index.floats.search,
                vectors,
                thresholds,
                pair,
                wide=wide,
                small_k=DEDUP_SMALL_TOP_K if both_sides else SMALL_TOP_K,
            )
            if regions is not None:
                region_pairs(session, index.floats.search, regions, thresholds, pair)
    # an audit's small test images (a dedup has no shape self-join: docs/recall.md)
    if index.shapes is not None and index.shapes.count and not both_sides:
        with phases.phase("shape search"):
            shape_pairs(index.shapes, state, thresholds, pair)
    if embedded:
        assert vectors is not None
        with phases.phase("vector search"):
            fill_cosines(index, vectors, pairs.values())
    with phases.phase("sizes (db)"):
        fill_min_sides(session, state, pairs.values())
    with phases.phase("orientations (db)"):
        turn_small_pairs(session, state, pairs.values(), thresholds)
    geometric = GeometricTier(store=store)
    # The geometric step's detection threads keep every core busy: BLAS threads of the
    # verification's small products (verifier correlations, descriptor distances) would only
    # spin against them (measured: 2.2x slower products, +40% CPU time for an audit), so BLAS
    # runs on the calling thread meanwhile. Summation order per product is unchanged.
    with threadpool_limits(limits=1, user_api="blas"):
        try:
            verify_candidates(
                session,
                state,
                pairs.values(),
                thresholds,
                geometric,
                query_model,
                phases,
                on_verify=on_verify,
                content_embed=content_embed,
                both_ways=not both_sides,
            )
        finally:
            geometric.close()
    geometric.log_cost(time.perf_counter() - started)
    out = CorpusMatches(corpus=index.corpus)
    classify_all(list(pairs.values()), thresholds)
    out.pairs.extend(p for p in pairs.values() if p.kind is not None)
    return out


def split_duplicates(
    state: SplitState, vectors: npt.NDArray[np.float32] | None, th: Thresholds
) -> list[DuplicatePair]:
    """Pairs of split rows (i < j) that duplicate each other.

    The corpus candidate search of ``match_corpus``, with the split as its own corpus (exact
    indexes over its rows, every row a hash k-NN query); verified on the stored thumbnails.
    """
    pairs: dict[tuple[int, int], Pair] = {}

    def pair(row: int, other: int) -> Pair:
        key = (min(row, other), max(row, other))
        if row == other:
            return Pair(row=row, item_id=other)  # a row found against itself: dropped
        if key not in pairs:
            pairs[key] = Pair(row=key[0], item_id=key[1])
        return pairs[key]

    for values, flag in (
        (state.sha256, "sha_equal"),
        (state.pixel, "pixel_equal"),
        (state.stream, "stream_equal"),
    ):
        for rows in rows_by_value(values).values():
            for a, b in combinations(rows, 2):
                setattr(pair(a, b), flag, True)
    n = len(state)
    if n > 1:
        k = min(TOP_K + 1, n)  # each row finds itself first
        store = BinaryStore.create()
        store.add(np.arange(n, dtype=np.int64), state.phash)
        hash_pairs(store, state, th, pair, k)
        if vectors is not None and len(vectors) == n:
            vector_pairs(exact_search(vectors), vectors, th, pair, k)
    _verify_split_pairs(state, pairs, th)
    out: list[DuplicatePair] = []
    classify_all(list(pairs.values()), th)
    for (i, j), p in sorted(pairs.items()):
        if p.kind is not None:
            out.append(DuplicatePair(i, j, p.kind, p.cosine, p.hamming))
    return out


def _verify_split_pairs(
    state: SplitState, pairs: dict[tuple[int, int], Pair], th: Thresholds
) -> None:
    """Verification scores of the split pairs the cheap tiers leave open, on the stored thumbnails.

    Row ``i`` is the query against all its open partners ``j > i`` in one ``verify_scores``
    call, on references prepared once per split row (the same scores as one call per pair).
    """
    from splitaudit.indexer.match.orientation import oriented_verify_scores
    from splitaudit.indexer.match.verify import prepare_references

    todo: dict[int, list[Pair]] = defaultdict(list)
    open_pairs = [(i, j, p) for (i, j), p in sorted(pairs.items()) if not p.digest_equal]
    for i, j, p in open_pairs:
        p.min_side = int(min(state.min_side[i], state.min_side[j]))
    needed = th.needs_verify_many(
        [p.hamming for *_, p in open_pairs],
        [p.cosine for *_, p in open_pairs],
        [p.min_side for *_, p in open_pairs],
    )
    for (i, _, p), need in zip(open_pairs, needed.tolist(), strict=True):
        if need:
            todo[i].append(p)
    if not todo:
        return
    partners = sorted({p.item_id for ps in todo.values() for p in ps})
    position = {row: n for n, row in enumerate(partners)}
    references = prepare_references(state.thumbs[partners], True)
    for i, ps in todo.items():
        picked = references.take([position[p.item_id] for p in ps])
        scores, turns = oriented_verify_scores(state.thumbs[i], [p.orientation for p in ps], picked)
        for p, score, turn in zip(ps, scores, turns, strict=True):
            p.verify = float(score)
            verified_orientation(p, turn, th)
