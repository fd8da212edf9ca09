"""The cheap tiers that gather candidate pairs: exact digests through the DB, pHash radius and
k-NN, embedding k-NN, regions of large test images; and the DB facts the later steps need
(sizes, columns by id)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.by_id import rows_by_id
from splitaudit.indexer.db.models import Item
from splitaudit.indexer.db.queries import in_chunks
from splitaudit.indexer.features.perceptual import ORIENTATIONS, Orientation
from splitaudit.indexer.features.shape import shape_descriptors
from splitaudit.indexer.match.pair import Pair, PairOf
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.corpus_index import CorpusIndex
from splitaudit.indexer.store.shape_index import ShapeStore

if TYPE_CHECKING:
    from splitaudit.indexer.match.inset_candidates import RegionVectors

TOP_K = 10
# Embedding candidates of a small test image (short side under ``small_side``): in a corpus of
# tens of thousands of thumbnails, unrelated ones outrank a re-scraped copy (shifted, zoomed,
# recoloured: cosine 0.6-0.85 to its source, as close as unrelated thumbnails of the same kind
# of scene). 32-px copies among 16,560 thumbnails of 138 photos: the source was among the 10
# nearest by cosine or pHash for 0.66 of them, among the 50 nearest by cosine or 10 by pHash
# for 0.81 (docs/recall.md, tenth round). Small pairs are verified on their 32-px thumbnails,
# the cheapest verification there is. 100 since 0.5.0: bench.recall with 12,000 distractor
# thumbnails, 50 -> 100, combo@32 0.903 -> 0.968 (seed 0), combo@64 0.903 -> 0.935 (seed 1),
# no false positive, 1.04-1.06x audit CPU; 200 found no more and one wrong corpus item.
SMALL_TOP_K = 100
# A dedup's small items ask fewer: a dedup asks every pair from both of its sides (3,000 real
# thumbnails: 100 instead of 50 cost 1.21x the dedup's CPU for 6 more cluster members of 1,067).
DEDUP_SMALL_TOP_K = 50
# Shape candidates of a small test image (``features.shape``): its nearest corpus thumbnails by
# shape descriptor. bench.recall --distractors 12000 (12,108-12,113 corpus images, seeds 0-2):
# a combo copy's source ranks among the 10 nearest for 0.80-0.87 of them, 0.84-0.93 among 25;
# with 10 the audit found 90 of 93 combo copies of seed 1 (88 before) and 89 of 91 of seed 0
# (88), no false positive, 1.01-1.08x its CPU (docs/recall.md).
SHAPE_TOP_K = 10
# Whatever ``small_side`` says, a test image up to this short side is searched by shape
# descriptor (the sides the low-resolution alignment covers; the corpus keeps descriptors up
# to ``features.shape.MAX_SIDE``). At the default ``small_side`` (96: under it a pair is
# small) a 96-px test image was not, and a zoomed, recoloured 96-px copy of a giraffe tile,
# its cosine 0.55 under a hundred unrelated thumbnails' (0.72-0.77), was nominated by
# nothing; its shape cosine is 0.94 (bench.recall --distractors 12000, seed 1; docs/recall.md)
SHAPE_SIDE = 96  # = low_res_align.MAX_SIDE (not imported here: it loads lazily, ~36 ms)
VectorSearch = Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
]


def rows_by_value(values: Sequence[str | None]) -> dict[str, list[int]]:
    """The query rows holding each digest value (a missing digest, None or "", matches nothing)."""
    rows: dict[str, list[int]] = defaultdict(list)
    for i, v in enumerate(values):
        if v:
            rows[v].append(i)
    return rows


def exact_pairs(session: Session, corpus_id: int, state: SplitState, pair: PairOf) -> None:
    """SHA-256 / pixel-digest / stream-digest equality through the DB indexes (no corpus-sized Python sets)."""
    for column, values, flag in (
        (Item.sha256, state.sha256, "sha_equal"),
        (Item.pixel_digest, state.pixel, "pixel_equal"),
        (Item.stream_digest, state.stream, "stream_equal"),
    ):
        by_value = rows_by_value(values)
        for chunk in in_chunks(list(by_value)):
            found = session.execute(
                select(Item.id, column).where(Item.corpus_id == corpus_id, column.in_(chunk))
            ).all()
            for item_id, value in found:
                for row in by_value.get(value or "", []):
                    setattr(pair(row, int(item_id)), flag, True)


def hash_pairs(
    store: BinaryStore,
    state: SplitState,
    th: Thresholds,
    pair: PairOf,
    k: int = TOP_K,
) -> None:
    """Every corpus hash within the near radius, plus the ``TOP_K`` nearest as verification candidates.

    Candidates come from a k-NN search, not a wide radius: at Hamming 20 a radius search
    would return thousands of unrelated items per query in a million-item corpus. Every query
    asks, embedded or not: among look-alike images (tiles of one scene, a photographer's
    series) an edited copy's embedding can rank far below the vector search's ``TOP_K`` while
    its pHash ranks first (docs/dedup.md, "Photos"). The candidate rule still decides: a large
    pair with an embedding is verified only if its cosine nominates it
    (``Thresholds.candidate_mask``); this search finds it, the cosine vouches for it.
    """

    def note(row: int, item_id: int, dist: int, orientation: Orientation) -> None:
        p = pair(row, item_id)
        if p.hamming is None or dist < p.hamming:
            p.hamming, p.orientation = int(dist), orientation

    for hashes, orientation in _oriented_hashes(state):
        for row, (ids, dists) in enumerate(store.search_radius(hashes, th.phash_hamming)):
            for item_id, dist in zip(ids.tolist(), dists.tolist(), strict=True):
                note(row, item_id, dist, orientation)
        # Turned or flipped, a copy is nominated within the near radius only: the k-NN of six
        # more orientations would verify up to 4x the candidates, nearly all unrelated.
        if orientation in ("identity", "mirror") and th.candidate_hamming > th.phash_hamming:
            # sub-linear with hash tables: exact within the store's knn_exact_radius
            knn_d, knn_i = store.search_knn_within(hashes, k, th.candidate_hamming)
            for row, (dists, found) in enumerate(zip(knn_d.tolist(), knn_i.tolist(), strict=True)):
                for dist, item_id in zip(dists, found, strict=True):
                    if item_id >= 0 and dist <= th.candidate_hamming:
                        note(row, item_id, dist, orientation)


def _oriented_hashes(
    state: SplitState,
) -> list[tuple[npt.NDArray[np.uint64], Orientation]]:
    """The query pHashes the hash tier searches, each with the orientation it tests: all eight
    of the dihedral group where the split has them, else the plain and mirrored ones."""
    if state.phash_oriented is None or len(state.phash_oriented) != len(state):
        return [(state.phash, "identity"), (state.phash_mirror, "mirror")]
    return [
        (np.ascontiguousarray(state.phash_oriented[:, i]), name)
        for i, name in enumerate(ORIENTATIONS)
    ]


def small_rows(state: SplitState, th: Thresholds) -> npt.NDArray[np.bool_]:
    """The split rows whose short side is under ``small_side`` (small test images)."""
    return np.asarray(state.min_side < getattr(th, "small_side", 96), bool)


def shape_rows(state: SplitState, th: Thresholds) -> npt.NDArray[np.bool_]:
    """The split rows searched by shape descriptor (``shape_pairs``): the small test images
    (under ``small_side``) and every thumbnail up to ``SHAPE_SIDE`` px."""
    return small_rows(state, th) | (np.asarray(state.min_side) <= SHAPE_SIDE)


def search_k(wide: npt.NDArray[np.bool_] | None, k: int = TOP_K, small_k: int = SMALL_TOP_K) -> int:
    """The ``k`` of ``vector_pairs``' one search: ``small_k`` where some row is ``wide``."""
    return max(k, small_k) if wide is not None and bool(wide.any()) else k


def vector_pairs(
    search: VectorSearch,
    vectors: npt.NDArray[np.float32],
    th: Thresholds,
    pair: PairOf,
    k: int = TOP_K,
    wide: npt.NDArray[np.bool_] | None = None,
    small_k: int = SMALL_TOP_K,
) -> None:
    """The ``k`` nearest vectors of each query row at or above the lowest cosine any tier uses;
    rows where ``wide`` is true (small test images) get their ``small_k`` nearest. One
    search of every row at ``search_k`` (a row's first ``k`` of more are its ``k`` nearest).
    A pair beyond a row's ``k`` nearest that no earlier tier (digests, hashes) nominated is
    marked ``wide_only``: it is verified upright and mirrored, not turned."""
    floor = min(th.semantic_cosine, th.near_cosine, th.candidate_cosine)
    count = search_k(wide, k, small_k)
    # Large chunks: approximate indexes search far faster in big batches (bench/scale.py).
    chunk = 16_384
    for start in range(0, len(vectors), chunk):
        scores, ids = search(vectors[start : start + chunk], count)
        for r in range(len(ids)):
            keep = count if wide is not None and wide[start + r] else k
            for n, (score, item_id) in enumerate(
                zip(scores[r, :keep].tolist(), ids[r, :keep].tolist(), strict=True)
            ):
                if item_id >= 0 and score >= floor:
                    p = pair(start + r, item_id)
                    if n >= k and p.hamming is None and p.cosine is None and not p.digest_equal:
                        p.wide_only = True  # no other tier nominated it (they ran first)
                    p.cosine = float(score)


def shape_pairs(
    store: ShapeStore, state: SplitState, th: Thresholds, pair: PairOf, k: int = SHAPE_TOP_K
) -> None:
    """The ``k`` corpus thumbnails nearest each small test image or thumbnail (``shape_rows``)
    by shape descriptor (``Pair.shape``: on a small pair a verification candidate by that,
    ``Thresholds.candidate_mask``; a larger pair is one by its cosine, as any other). A pair
    no earlier tier nominated is ``wide_only``: verified upright and mirrored, not turned."""
    rows = np.flatnonzero(shape_rows(state, th))
    if not len(rows) or store.count == 0:
        return
    scores, ids = store.search(shape_descriptors(state.thumbs[rows]), k)
    for row, row_scores, row_ids in zip(rows.tolist(), scores.tolist(), ids.tolist(), strict=True):
        for score, item_id in zip(row_scores, row_ids, strict=True):
            if item_id < 0:
                continue
            p = pair(row, item_id)
            if p.hamming is None and p.cosine is None and not p.digest_equal:
                p.wide_only = True  # no other tier nominated it (they ran first)
            p.shape = float(score)


def region_pairs(
    session: Session, search: VectorSearch, regions: RegionVectors, th: Thresholds, pair: PairOf
) -> None:
    """Candidates nominated by regions of the large test images (a corpus image inset in a
    screenshot, ``splitaudit.indexer.match.inset_candidates``), for the geometric step: corpus
    images whose short side is ``small_side`` or more (the geometric step's)."""
    from splitaudit.indexer.match.inset_candidates import REGION_COSINE_MARGIN, region_candidates

    if not len(regions):
        return

    def large(ids: list[int]) -> set[int]:
        return {i for i, side in short_sides(session, ids).items() if side >= th.small_side}

    floor = th.candidate_cosine - REGION_COSINE_MARGIN
    for (row, item_id), hit in region_candidates(search, regions, floor, eligible=large).items():
        p = pair(row, item_id)
        if p.region_cosine is None or hit.cosine > p.region_cosine:
            p.region_cosine, p.region, p.other_region = hit.cosine, hit.box, hit.other_box


def fill_cosines(
    index: CorpusIndex, vectors: npt.NDArray[np.float32], pairs: Iterable[Pair]
) -> None:
    """Cosine for pairs found by hashes only (reconstructed from the index where it can)."""
    assert index.floats is not None
    for p in pairs:
        if p.cosine is not None:
            continue
        try:
            v = index.floats.index.reconstruct(int(p.item_id))
        except RuntimeError:
            continue  # approximate index without a direct map: no cosine for this pair
        p.cosine = float(np.dot(vectors[p.row], v))


def fill_min_sides(session: Session, state: SplitState, pairs: Iterable[Pair]) -> None:
    """The smaller short side of the two images of each pair (small pairs need verification)."""
    pairs = list(pairs)
    sides = short_sides(session, sorted({p.item_id for p in pairs}))
    for p in pairs:
        own = int(state.min_side[p.row])
        p.min_side = min(own, sides[p.item_id]) if p.item_id in sides else own


def short_sides(session: Session, ids: Sequence[int]) -> dict[int, int]:
    """The short side (px) of each corpus item in ``ids`` whose size is known."""
    sides: dict[int, int] = {}
    for item_id, w, h in rows_by_id(session, [Item.width, Item.height], ids):
        if w and h:
            sides[int(item_id)] = min(int(w), int(h))
    return sides


def column_by_id(session: Session, column: Any, ids: Sequence[int]) -> dict[int, Any]:
    """``column`` (e.g. ``Item.locator``) of each row of its table in ``ids``; nulls left out."""
    return {int(row_id): value for row_id, value in rows_by_id(session, [column], ids) if value}


def exact_search(vectors: npt.NDArray[np.float32]) -> VectorSearch:
    """Inner-product search over ``vectors`` themselves (ids are row positions)."""
    import faiss

    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(np.ascontiguousarray(vectors))

    def search(
        queries: npt.NDArray[np.float32], k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        scores, ids = flat.search(np.ascontiguousarray(queries), k)
        return scores, ids.astype(np.int64)

    return search
