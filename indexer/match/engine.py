"""Matching a split against one corpus: exact, near and semantic candidates, verified and classified."""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from PIL import Image
from sqlalchemy import select
from sqlalchemy.orm import Session
from threadpoolctl import threadpool_limits

from splitaudit.indexer.db.models import Item, SplitItem
from splitaudit.indexer.db.queries import in_chunks
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.features.perceptual import ORIENTATIONS, Orientation
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.match.found import DuplicatePair
from splitaudit.indexer.match.geometric_tier import GeometricTier, shortlist, zoom_in_mask
from splitaudit.indexer.match.geometry import GeometricMatch
from splitaudit.indexer.match.inset_refit import needs_refit
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.sources.record import Locator
from splitaudit.indexer.store.binary_index import BinaryStore
from splitaudit.indexer.store.corpus_index import CorpusIndex

if TYPE_CHECKING:
    from splitaudit.indexer.match.content_region import Embed
    from splitaudit.indexer.match.inset_candidates import RegionVectors
    from splitaudit.indexer.match.verify_store import VerifyStore

log = logging.getLogger(__name__)
TOP_K = 10
MATCHES_IN_FLIGHT = 2  # test images whose geometric matching may still be running
THUMB_CACHE = 200_000  # verification thumbnails kept per corpus (~200 MiB)
PairOf = Callable[[int, int], "Pair"]  # the evidence record of (query row, candidate id)
VectorSearch = Callable[
    [npt.NDArray[np.float32], int], tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]
]


@dataclass
class Pair:
    """Evidence gathered for one (split item row, corpus item) pair."""

    row: int
    item_id: int
    sha_equal: bool = False
    pixel_equal: bool = False
    stream_equal: bool = False
    hamming: int | None = None
    # how the test image is turned / flipped relative to the corpus image, by the closest pHash
    orientation: Orientation = "identity"
    cosine: float | None = None
    verify: float | None = None
    min_side: int | None = None
    geometry: GeometricMatch | None = None
    # best cosine of a region of a large test image (``inset_candidates``): an inset copy
    region_cosine: float | None = None
    # cosine of the content region alone of a pair whose fit was refused as an overlay
    # (``content_region``): semantic only if it is similar too
    content_cosine: float | None = None
    kind: str | None = None
    rules: list[str] = field(default_factory=list)

    @property
    def mirrored(self) -> bool:
        """Whether the test image is the corpus image flipped left-right (by the pHash)."""
        return self.orientation == "mirror"

    @mirrored.setter
    def mirrored(self, value: bool) -> None:
        self.orientation = "mirror" if value else "identity"

    @property
    def digest_equal(self) -> bool:
        """Same file, same decoded pixels, or same JPEG coded data: an exact copy."""
        return self.sha_equal or self.pixel_equal or self.stream_equal

    def evidence(self) -> dict[str, Any]:
        """What the report shows as the reason for this match."""
        ev: dict[str, Any] = {}
        if self.sha_equal:
            ev["sha256_equal"] = True
        if self.pixel_equal:
            ev["pixel_digest_equal"] = True
        if self.stream_equal:
            ev["stream_digest_equal"] = True
        if self.hamming is not None:
            ev["phash_hamming"] = self.hamming
            if self.mirrored:
                ev["mirrored"] = True
            if self.orientation != "identity":
                ev["orientation"] = self.orientation
        if self.cosine is not None:
            ev["cosine"] = round(self.cosine, 4)
        if self.verify is not None:
            ev["verify_score"] = round(self.verify, 4)
        if self.geometry is not None and self.geometry.inliers:
            ev["geometry"] = self.geometry.evidence()
        if self.content_cosine is not None:
            ev["content_cosine"] = round(self.content_cosine, 4)
        if self.rules:
            ev["near_rules"] = self.rules
        if self.min_side is not None:
            ev["min_side"] = self.min_side
        return ev


@dataclass
class CorpusMatches:
    """The classified pairs of a split against one corpus (each with a kind)."""

    corpus: str
    pairs: list[Pair] = field(default_factory=list)


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

    def pair(row: int, item_id: int) -> Pair:
        key = (row, item_id)
        if key not in pairs:
            pairs[key] = Pair(row=row, item_id=item_id)
        return pairs[key]

    with phases.phase("exact (db)"):
        _exact_pairs(session, corpus_id, state, pair)
    # Hash k-NN candidates matter where cosine cannot nominate: small images, or no embeddings.
    has_vectors = vectors is not None and index.floats is not None and len(vectors) > 0
    knn_rows = (
        np.ones(len(state), bool)
        if not has_vectors
        else state.min_side < getattr(thresholds, "small_side", 96)
    )
    with phases.phase("hash search"):
        _hash_pairs(index.hashes, state, thresholds, pair, knn_rows)
    if vectors is not None and index.floats is not None and len(vectors):
        with phases.phase("vector search"):
            _vector_pairs(index.floats.search, vectors, thresholds, pair)
            if regions is not None:
                _region_pairs(session, index.floats.search, regions, thresholds, pair)
            _fill_cosines(index, vectors, pairs.values())
    with phases.phase("sizes (db)"):
        _fill_min_sides(session, state, pairs.values())
    with phases.phase("orientations (db)"):
        _turn_small_pairs(session, state, pairs.values(), thresholds)
    geometric = GeometricTier(store=store)
    # The geometric step's detection threads keep every core busy: BLAS threads of the
    # verification's small products (verifier correlations, descriptor distances) would only
    # spin against them (measured: 2.2x slower products, +40% CPU time for an audit), so BLAS
    # runs on the calling thread meanwhile. Summation order per product is unchanged.
    with threadpool_limits(limits=1, user_api="blas"):
        try:
            _verify_candidates(
                session,
                state,
                pairs.values(),
                thresholds,
                geometric,
                query_model,
                phases,
                on_verify=on_verify,
                content_embed=content_embed,
            )
        finally:
            geometric.close()
    geometric.log_cost(time.perf_counter() - started)
    out = CorpusMatches(corpus=index.corpus)
    for p in pairs.values():
        _classify(p, thresholds)
        if p.kind is not None:
            out.pairs.append(p)
    return out


def _classify(p: Pair, th: Thresholds) -> None:
    """Set the kind of a pair from its evidence (``None``: not a duplicate), with the near rules."""
    if p.digest_equal:
        p.kind = MatchKind.EXACT
        return
    geo = None if p.geometry is None else p.geometry.support
    p.kind = th.classify(p.hamming, p.cosine, p.verify, p.min_side, geo, p.content_cosine)
    if p.kind == MatchKind.NEAR:
        p.rules = th.near_evidence(p.hamming, p.cosine, p.verify, p.min_side, geo)


def _rows_by_value(values: Sequence[str | None]) -> dict[str, list[int]]:
    """The query rows holding each digest value (a missing digest, None or "", matches nothing)."""
    rows: dict[str, list[int]] = defaultdict(list)
    for i, v in enumerate(values):
        if v:
            rows[v].append(i)
    return rows


def _fill_min_sides(session: Session, state: SplitState, pairs: Iterable[Pair]) -> None:
    """The smaller short side of the two images of each pair (small pairs need verification)."""
    pairs = list(pairs)
    sides = _short_sides(session, sorted({p.item_id for p in pairs}))
    for p in pairs:
        own = int(state.min_side[p.row])
        p.min_side = min(own, sides[p.item_id]) if p.item_id in sides else own


def _short_sides(session: Session, ids: Sequence[int]) -> dict[int, int]:
    """The short side (px) of each corpus item in ``ids`` whose size is known."""
    sides: dict[int, int] = {}
    for chunk in in_chunks(ids):
        for item_id, w, h in session.execute(
            select(Item.id, Item.width, Item.height).where(Item.id.in_(chunk))
        ):
            if w and h:
                sides[int(item_id)] = min(int(w), int(h))
    return sides


def _turn_small_pairs(
    session: Session, state: SplitState, pairs: Iterable[Pair], th: Thresholds
) -> None:
    """Small candidate pairs the hash tier did not find turned: the orientation whose pHash of
    the test image comes closest to the corpus image's, so the verifier tries the test image
    turned back that way (a turned thumbnail nominated by its cosine or its plain pHash: a
    brick wall turned 180 degrees is 14 bits from its source that way, 34 upright). The hash
    tier looks for turned copies within the near radius only (``_hash_pairs``); this adds no
    candidate, it only orients the ones there are."""
    if state.phash_oriented is None or len(state.phash_oriented) != len(state):
        return
    todo = [
        p
        for p in pairs
        if p.orientation in ("identity", "mirror")
        and (p.hamming is None or p.hamming > th.phash_hamming)
        and p.min_side is not None
        and bool(th.small_mask(float(p.min_side)))
        and not p.digest_equal
    ]
    if not todo:
        return
    from splitaudit.indexer.match.orientation import closest_turn

    hashes = _column_by_id(session, Item.phash, sorted({p.item_id for p in todo}))
    for p in todo:
        if p.item_id in hashes:
            turn = closest_turn(state.phash_oriented[p.row], int(hashes[p.item_id]), p.hamming)
            if turn is not None:
                p.hamming, p.orientation = turn


def _exact_pairs(session: Session, corpus_id: int, state: SplitState, pair: PairOf) -> None:
    """SHA-256 / pixel-digest / stream-digest equality through the DB indexes (no corpus-sized Python sets)."""
    for column, values, flag in (
        (Item.sha256, state.sha256, "sha_equal"),
        (Item.pixel_digest, state.pixel, "pixel_equal"),
        (Item.stream_digest, state.stream, "stream_equal"),
    ):
        rows_by_value = _rows_by_value(values)
        for chunk in in_chunks(list(rows_by_value)):
            found = session.execute(
                select(Item.id, column).where(Item.corpus_id == corpus_id, column.in_(chunk))
            ).all()
            for item_id, value in found:
                for row in rows_by_value.get(value or "", []):
                    setattr(pair(row, int(item_id)), flag, True)


def _hash_pairs(
    store: BinaryStore,
    state: SplitState,
    th: Thresholds,
    pair: PairOf,
    knn_rows: npt.NDArray[np.bool_],
    k: int = TOP_K,
) -> None:
    """Every corpus hash within the near radius, plus the ``TOP_K`` nearest as verification candidates.

    Candidates come from a k-NN search, not a wide radius: at Hamming 20 a radius search
    would return thousands of unrelated items per query in a million-item corpus.
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
        rows = (
            np.flatnonzero(knn_rows)
            if orientation in ("identity", "mirror")
            else np.zeros(0, np.intp)
        )
        if th.candidate_hamming > th.phash_hamming and len(rows):
            # sub-linear with hash tables: exact within the store's knn_exact_radius
            knn_d, knn_i = store.search_knn_within(hashes[rows], k, th.candidate_hamming)
            for n, row in enumerate(rows.tolist()):
                for dist, item_id in zip(knn_d[n].tolist(), knn_i[n].tolist(), strict=True):
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


def _vector_pairs(
    search: VectorSearch,
    vectors: npt.NDArray[np.float32],
    th: Thresholds,
    pair: PairOf,
    k: int = TOP_K,
) -> None:
    """The ``k`` nearest vectors of each query row at or above the lowest cosine any tier uses."""
    floor = min(th.semantic_cosine, th.near_cosine, th.candidate_cosine)
    # Large chunks: approximate indexes search far faster in big batches (bench/scale.py).
    chunk = 16_384
    for start in range(0, len(vectors), chunk):
        scores, ids = search(vectors[start : start + chunk], k)
        for r in range(len(ids)):
            for score, item_id in zip(scores[r].tolist(), ids[r].tolist(), strict=True):
                if item_id >= 0 and score >= floor:
                    pair(start + r, item_id).cosine = float(score)


def _region_pairs(
    session: Session, search: VectorSearch, regions: RegionVectors, th: Thresholds, pair: PairOf
) -> None:
    """Candidates nominated by regions of the large test images (a corpus image inset in a
    screenshot, ``splitaudit.indexer.match.inset_candidates``), for the geometric step: corpus
    images whose short side is ``small_side`` or more (the geometric step's)."""
    from splitaudit.indexer.match.inset_candidates import REGION_COSINE_MARGIN, region_candidates

    if not len(regions):
        return

    def large(ids: list[int]) -> set[int]:
        return {i for i, side in _short_sides(session, ids).items() if side >= th.small_side}

    floor = th.candidate_cosine - REGION_COSINE_MARGIN
    for (row, item_id), score in region_candidates(search, regions, floor, eligible=large).items():
        p = pair(row, item_id)
        p.region_cosine = max(score, p.region_cosine if p.region_cosine is not None else -1.0)


def _fill_cosines(
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


def _verify_candidates(
    session: Session,
    state: SplitState,
    pairs: Iterable[Pair],
    th: Thresholds,
    geometric: GeometricTier,
    query_model: type[SplitItem] | type[Item] = SplitItem,
    phases: PhaseTimes | None = None,
    on_verify: Callable[[int, int], None] | None = None,
    content_embed: Embed | None = None,
) -> None:
    """Run the pixel verifier on candidates that hashes/cosine alone do not decide, then the
    geometric match on the large ones it does not settle either (``splitaudit.indexer.match.geometric_tier``)."""
    from splitaudit.indexer.match.orientation import oriented_verify_scores
    from splitaudit.indexer.match.verify import verify_thumbnail

    todo: dict[int, list[Pair]] = defaultdict(list)
    for p in pairs:
        if p.digest_equal:
            continue
        if th.needs_verify(p.hamming, p.cosine, p.min_side) or p.region_cosine is not None:
            todo[p.row].append(p)
    if not todo:
        return
    phases = phases or PhaseTimes()
    item_ids = sorted({p.item_id for ps in todo.values() for p in ps})
    store = geometric.store
    with phases.phase("locators (db)"):
        locators = _column_by_id(session, Item.locator, item_ids)
        split_locators = _column_by_id(
            session, query_model.locator, [int(state.ids[r]) for r in todo]
        )
        # file SHA-256: what the verification store is keyed by
        digests = _column_by_id(session, Item.sha256, item_ids) if store is not None else {}

    def _load(locator: dict[str, Any] | None) -> Image.Image | None:
        with phases.phase("verification: decode"):
            return _load_image(locator)

    # Corpus candidates are cached as 32x32 verification thumbnails (1 KiB each), not images.
    cache: dict[int, npt.NDArray[np.uint8] | None] = {}
    # geometric matches still running (the next test image is prepared meanwhile)
    # (pairs, their matches to come, the test image's row, its corpus images' loader)
    pending: deque[
        tuple[
            list[Pair],
            Callable[[], list[GeometricMatch]],
            int,
            Callable[[int], Image.Image | None],
            Image.Image,
        ]
    ] = deque()

    def settle(in_flight: int) -> None:
        while len(pending) > in_flight:
            chosen, result, row, load, shown = pending.popleft()
            with phases.phase("verification: geometric"):
                found = result()
            for p, match in zip(chosen, found, strict=True):
                p.geometry = match
            again = [
                p
                for p in chosen
                if p.geometry is not None and needs_refit(p.geometry, th.geometry_inliers)
            ]
            if again:
                with phases.phase("verification: inset refit"):
                    _refit_insets(
                        again, split_locators.get(int(state.ids[row])), geometric, load, digests
                    )
            if content_embed is not None:
                with phases.phase("verification: content region"):
                    _content_cosines(chosen, shown, load, content_embed, th)

    for done, (row, ps) in enumerate(todo.items()):
        if on_verify is not None:
            on_verify(done, len(todo))
        # The verifier's score was calibrated on the <=256 px decode: the ingestion's, kept for
        # the first rows of a split (``KEPT_IMAGES_BYTES``), else decoded again (only rows with
        # candidates: keeping every image of a large split costs too much).
        query = state.images.get(row)
        if query is None:
            query = _load(split_locators.get(int(state.ids[row])))
        if query is None:
            continue
        thumbs: list[npt.NDArray[np.uint8]] = []
        kept: list[Pair] = []
        loaded: dict[int, Image.Image] = {}  # decoded here: the geometric step reuses them
        if store is not None:
            unseen = [p.item_id for p in ps if p.item_id not in cache and p.item_id in digests]
            with phases.phase("verification: store"):
                stored = store.thumbnails(digests[i] for i in unseen)
            for item_id in unseen:
                if digests[item_id] in stored:
                    cache[item_id] = stored[digests[item_id]]
        for p in ps:
            if p.item_id not in cache:
                img = _load(locators.get(p.item_id))
                cache[p.item_id] = None
                if img is not None:
                    cache[p.item_id] = made = verify_thumbnail(img)
                    loaded[p.item_id] = img
                    if store is not None:
                        store.put_thumbnail(digests.get(p.item_id), made)
            thumb = cache[p.item_id]
            if thumb is not None:
                thumbs.append(thumb)
                kept.append(p)
        if thumbs:
            zoom = zoom_in_mask([p.cosine for p in kept], [p.min_side for p in kept], th)
            with phases.phase("verification: pixel verifier"):
                scores, turns = oriented_verify_scores(
                    query, [p.orientation for p in kept], np.stack(thumbs), zoom
                )
            for p, score, turn in zip(kept, scores, turns, strict=True):
                p.verify = float(score)
                _verified_orientation(p, turn, th)
            _align_small_pairs(query, kept, thumbs, th, phases)
            settled = [th.is_near(p.hamming, p.cosine, p.verify, p.min_side) for p in kept]
            picked = shortlist(
                [_nominating_cosine(p) for p in kept], settled, [p.min_side for p in kept], th
            )
            chosen = [kept[i] for i in picked] + _region_nominated(kept, settled, picked, th)

            def load(item_id: int, seen: dict[int, Image.Image] = loaded) -> Image.Image | None:
                return seen.get(item_id) or _load(locators.get(item_id))

            geometric_started = time.perf_counter()
            decoding = phases.seconds.get("verification: decode", 0.0)
            pending.append(
                (
                    chosen,
                    geometric.submit(query, [p.item_id for p in chosen], load, digests),
                    row,
                    load,
                    query,
                )
            )
            decoded = phases.seconds.get("verification: decode", 0.0) - decoding
            phases.add("verification: geometric", time.perf_counter() - geometric_started - decoded)
            settle(MATCHES_IN_FLIGHT)
        if len(cache) > THUMB_CACHE:
            cache.clear()
    settle(0)


def _content_cosines(
    pairs: Sequence[Pair],
    query: Image.Image,
    load: Callable[[int], Image.Image | None],
    embed: Embed,
    th: Thresholds,
) -> None:
    """The content cosine (``content_region.content_cosine``) of the pairs it decides: a fit
    refused as an overlay at the identity alignment, a cosine that would make the pair
    semantic, and not near (a vetoed fit leaves no near rule; a refused one may)."""
    from splitaudit.indexer.match.content_region import content_cosine, needs_content

    for p in pairs:
        if p.cosine is None or p.cosine < th.semantic_cosine or not needs_content(p.geometry):
            continue
        assert p.geometry is not None
        if th.is_near(p.hamming, p.cosine, p.verify, p.min_side, p.geometry.support):
            continue
        corpus = load(p.item_id)
        if corpus is not None:
            p.content_cosine = content_cosine(query, corpus, p.geometry, embed)


def _refit_insets(
    pairs: Sequence[Pair],
    locator: dict[str, Any] | None,
    geometric: GeometricTier,
    load: Callable[[int], Image.Image | None],
    digests: dict[int, str],
) -> None:
    """The inset fits ``needs_refit`` marks, fitted again on a crop of the test image decoded at
    up to ``inset_refit.DECODE_SIDE`` px (``inset_refit.refit``)."""
    from splitaudit.indexer.match.inset_refit import DECODE_SIDE, refit

    full = _load_image(locator, DECODE_SIDE)
    if full is None:
        return
    for p in pairs:
        assert p.geometry is not None

        def fit(crop: Image.Image, item_id: int = p.item_id) -> GeometricMatch:
            return geometric.match(crop, [item_id], load, digests)[0]

        p.geometry = refit(p.geometry, full, fit)


def _region_nominated(
    kept: Sequence[Pair], settled: Sequence[bool], picked: Sequence[int], th: Thresholds
) -> list[Pair]:
    """The open pairs a region of the test image nominated (an inset copy) that ``shortlist``
    left out: their region cosine may lie up to ``REGION_COSINE_MARGIN`` under
    ``candidate_cosine``; ``region_candidates`` caps them at ``REGION_TOP_K`` per test image."""
    taken = set(picked)
    return [
        p
        for i, (p, done) in enumerate(zip(kept, settled, strict=True))
        if i not in taken
        and not done
        and p.region_cosine is not None
        and (p.min_side is None or p.min_side >= th.small_side)
    ]


def _nominating_cosine(p: Pair) -> float | None:
    """The cosine that ranks a pair for the geometric step: the whole test image's, or the
    best of its regions' where one nominated an inset copy."""
    if p.region_cosine is None:
        return p.cosine
    return max(p.region_cosine, p.cosine if p.cosine is not None else -1.0)


def _align_small_pairs(
    query: Image.Image,
    kept: Sequence[Pair],
    thumbs: Sequence[npt.NDArray[np.uint8]],
    th: Thresholds,
    phases: PhaseTimes,
) -> None:
    """Dense low-resolution alignment (``splitaudit.indexer.match.low_res_align``) of the small,
    upright pairs the verifier left open: a re-scraped thumbnail shifted and zoomed; a pair
    that aligns at ``ALIGNED_NEAR`` or better keeps that score as its verification score."""
    from splitaudit.indexer.match.low_res_align import (
        ALIGNED_NEAR,
        MAX_SIDE,
        aligned_scores,
        prepare_query,
    )

    rows = [
        i
        for i, p in enumerate(kept)
        if p.min_side is not None
        and p.min_side <= MAX_SIDE
        and p.orientation == "identity"
        and not th.is_near(p.hamming, p.cosine, p.verify, p.min_side)
    ]
    if not rows:
        return
    with phases.phase("verification: low-res alignment"):
        scores = aligned_scores(prepare_query(query), np.stack([thumbs[i] for i in rows]))
    for i, score in zip(rows, scores.tolist(), strict=True):
        p = kept[i]
        if score >= ALIGNED_NEAR and score > (p.verify if p.verify is not None else -1.0):
            p.verify = float(score)


def _verified_orientation(p: Pair, found: Orientation, th: Thresholds) -> None:
    """The pair's orientation after verification: the pHash's where it is within the near radius
    (hash and orientation are one piece of evidence), else the one the verifier aligned in."""
    if p.hamming is None or p.hamming > th.phash_hamming:
        p.orientation = found


def _column_by_id(session: Session, column: Any, ids: Sequence[int]) -> dict[int, Any]:
    """``column`` (e.g. ``Item.locator``) of each row of its table in ``ids``; nulls left out."""
    table = column.class_
    out: dict[int, Any] = {}
    for chunk in in_chunks(ids):
        for row_id, value in session.execute(select(table.id, column).where(table.id.in_(chunk))):
            if value:
                out[int(row_id)] = value
    return out


def _load_image(locator: dict[str, Any] | None, side: int | None = None) -> Image.Image | None:
    """Decode an image from a stored locator (the ingestion's <=256 px decode; with ``side``,
    its long side at ``side`` px at most: ``inset_candidates.region_decode``); None when its
    bytes are gone or unreadable."""
    if not locator:
        return None
    try:
        data = Locator.from_dict(locator).read_bytes()
        if side is not None:
            from splitaudit.indexer.match.inset_candidates import region_decode

            return region_decode(data, side)
        return decode_image(data, pixels_only=True).image
    except Exception as exc:  # missing source or undecodable: the pair keeps its other evidence
        log.info("cannot load %s for verification: %s", locator, exc)
        return None


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
        for rows in _rows_by_value(values).values():
            for a, b in combinations(rows, 2):
                setattr(pair(a, b), flag, True)
    n = len(state)
    if n > 1:
        k = min(TOP_K + 1, n)  # each row finds itself first
        store = BinaryStore.create()
        store.add(np.arange(n, dtype=np.int64), state.phash)
        _hash_pairs(store, state, th, pair, np.ones(n, bool), k)
        if vectors is not None and len(vectors) == n:
            _vector_pairs(_exact_search(vectors), vectors, th, pair, k)
    _verify_split_pairs(state, pairs, th)
    out: list[DuplicatePair] = []
    for (i, j), p in sorted(pairs.items()):
        _classify(p, th)
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
    for (i, j), p in sorted(pairs.items()):
        if p.digest_equal:
            continue
        p.min_side = int(min(state.min_side[i], state.min_side[j]))
        if th.needs_verify(p.hamming, p.cosine, p.min_side):
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
            _verified_orientation(p, turn, th)


def _exact_search(vectors: npt.NDArray[np.float32]) -> VectorSearch:
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
