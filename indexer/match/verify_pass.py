"""The verification pass of ``match_corpus``: the pixel verifier on the candidates the cheap
tiers leave open, then the geometric step (in flight while the next test image is prepared),
inset refits and content cosines."""

from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from PIL import Image
from sqlalchemy.orm import Session

from splitaudit.indexer.db.by_id import rows_by_id
from splitaudit.indexer.db.models import Item, SplitItem
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.match.geometric_tier import GeometricTier, shortlist, zoom_in_mask
from splitaudit.indexer.match.geometry import GeometricMatch
from splitaudit.indexer.match.inset_refit import needs_refit, needs_region_refit
from splitaudit.indexer.match.pair import Pair, near_all
from splitaudit.indexer.match.pair_search import column_by_id
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.small_pairs import (
    align_small_pairs,
    confirm_turned_hashes,
    verified_orientation,
)
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds
from splitaudit.indexer.match.verify_overlay import refuse_overlay_verdicts
from splitaudit.indexer.match.zoom_cache import ZoomCache
from splitaudit.indexer.sources.record import Locator

if TYPE_CHECKING:
    from splitaudit.indexer.match.content_region import Embed

log = logging.getLogger(__name__)
MATCHES_IN_FLIGHT = 2  # test images whose geometric matching may still be running
THUMB_CACHE = 200_000  # verification thumbnails kept per corpus (~200 MiB)


def verify_candidates(
    session: Session,
    state: SplitState,
    pairs: Iterable[Pair],
    th: Thresholds,
    geometric: GeometricTier,
    query_model: type[SplitItem] | type[Item] = SplitItem,
    phases: PhaseTimes | None = None,
    on_verify: Callable[[int, int], None] | None = None,
    content_embed: Embed | None = None,
    both_ways: bool = True,
) -> None:
    """Run the pixel verifier on candidates that hashes/cosine alone do not decide, then the
    geometric match on the large ones it does not settle either (``splitaudit.indexer.match.geometric_tier``).
    ``both_ways``: small pairs are aligned the other way round too (``align_small_pairs``;
    off for a dedup, which asks each pair from both of its sides)."""
    from splitaudit.indexer.match.orientation import oriented_verify_scores
    from splitaudit.indexer.match.verify import verify_thumbnail

    todo: dict[int, list[Pair]] = defaultdict(list)
    for p in _open_pairs(list(pairs), th):
        todo[p.row].append(p)
    if not todo:
        return
    phases = phases or PhaseTimes()
    item_ids = sorted({p.item_id for ps in todo.values() for p in ps})
    store = geometric.store
    with phases.phase("locators (db)"):
        # with a verification store, each item's file SHA-256 too (what the store is keyed by)
        columns = [Item.locator, Item.sha256] if store is not None else [Item.locator]
        locators: dict[int, Any] = {}
        digests: dict[int, str] = {}
        for item_id, locator, *sha in rows_by_id(session, columns, item_ids):
            if locator:
                locators[int(item_id)] = locator
            if sha and sha[0]:
                digests[int(item_id)] = sha[0]
        split_locators = column_by_id(
            session, query_model.locator, [int(state.ids[r]) for r in todo]
        )

    def _load(locator: dict[str, Any] | None) -> Image.Image | None:
        with phases.phase("verification: decode"):
            return _load_image(locator)

    # Corpus candidates are cached as 32x32 verification thumbnails (1 KiB each), not images.
    cache: dict[int, npt.NDArray[np.uint8] | None] = {}
    zooms = ZoomCache()  # each candidate's zoom-in references, for every test image it is in
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
            if again or any(_region_refit(p, th) for p in chosen):
                with phases.phase("verification: inset refit"):
                    _refit_insets(
                        again,
                        chosen,
                        split_locators.get(int(state.ids[row])),
                        geometric,
                        load,
                        digests,
                        th,
                    )
            with phases.phase("verification: overlay"):
                refuse_overlay_verdicts(chosen, shown, load, th)
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
            # the zoom-in search is ~3/4 of the verifier's CPU (1.35 against 0.33 ms a pair);
            # pairs only a small test image's wider search nominated are re-scraped copies,
            # whose zooms (0.72-1.4) the low-resolution alignment searches anyway
            zoom = [z and not p.wide_only for z, p in zip(zoom, kept, strict=True)]
            with phases.phase("verification: pixel verifier"):
                references = zooms.references([p.item_id for p in kept], np.stack(thumbs), zoom)
                scores, turns = oriented_verify_scores(
                    query, [p.orientation for p in kept], references, zoom
                )
            for p, score, turn in zip(kept, scores, turns, strict=True):
                p.verify = float(score)
                verified_orientation(p, turn, th)
            align_small_pairs(query, kept, thumbs, th, phases, both_ways=both_ways)
            confirm_turned_hashes(kept, th)
            settled = near_all(kept, th)
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
                    geometric.submit(
                        query,
                        [p.item_id for p in chosen],
                        load,
                        digests,
                        query_item=int(state.ids[row]) if query_model is Item else None,
                    ),
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
    log.debug("zoom-in references: %d prepared, %d reused", zooms.misses, zooms.hits)


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
        if th.is_near(p.hamming, p.cosine, p.verify, p.min_side, p.geometry.support, p.shape):
            continue
        corpus = load(p.item_id)
        if corpus is not None:
            p.content_cosine = content_cosine(query, corpus, p.geometry, embed)


def _refit_insets(
    boxed: Sequence[Pair],
    chosen: Sequence[Pair],
    locator: dict[str, Any] | None,
    geometric: GeometricTier,
    load: Callable[[int], Image.Image | None],
    digests: dict[int, str],
    th: Thresholds,
) -> None:
    """The inset fits ``needs_refit`` marks (``boxed``), fitted again on a crop of the test image
    decoded at up to ``inset_refit.DECODE_SIDE`` px around their box (``inset_refit.refit``);
    then the ``chosen`` pairs still open that a region nominated (``needs_region_refit``), on
    that region's crop; then, where a region's crop found the inset but no copy, the crop
    around the box that fit drew."""
    from splitaudit.indexer.match.inset_refit import DECODE_SIDE, refit

    full = _load_image(locator, DECODE_SIDE)
    if full is None:
        return

    def fit_to(item_id: int) -> Callable[[Image.Image], GeometricMatch]:
        return lambda crop: geometric.match(crop, [item_id], load, digests)[0]

    for p in boxed:
        assert p.geometry is not None
        p.geometry = refit(p.geometry, full, fit_to(p.item_id))
    due = [p for p in chosen if _region_refit(p, th)]
    # fits refused as a shared overlay on the reduced decode: cleared only by a copy on a crop
    refused = {p.item_id: p.geometry for p in due if p.geometry is not None and p.geometry.vetoes}
    # corpus items whose fits shared test keypoints with a fit to another corpus image there
    # (``burstiness``): matched on every region crop too, which judges them again at full size
    partners = [p.item_id for p in chosen if p.geometry is not None and p.geometry.shared_with]
    _refit_regions(due, lambda p: p.region, full, geometric, load, digests, partners)
    # where the best region's crop shows no copy, the best region of the other kind's
    again = [p for p in due if p.other_region is not None and _region_refit(p, th)]
    _refit_regions(again, lambda p: p.other_region, full, geometric, load, digests, partners)
    _refit_found_boxes(due, full, fit_to, th)
    for p in due:
        first = refused.get(p.item_id)
        if first is not None and (p.geometry is None or p.geometry.support < th.geometry_inliers):
            p.geometry = first


def _refit_found_boxes(
    pairs: Sequence[Pair],
    full: Image.Image,
    fit_to: Callable[[int], Callable[[Image.Image], GeometricMatch]],
    th: Thresholds,
) -> None:
    """A region larger than the inset shows it small (a text page at 30% of a page keeps 5-6
    inliers in a 45% window's crop): where a region crop's fit found the inset but no copy
    (``needs_refit``), the crop around the box that fit drew, the inset most of it at full
    size (~120-190 inliers)."""
    from splitaudit.indexer.match.inset_refit import refit

    for p in pairs:
        if p.geometry is not None and needs_refit(p.geometry, th.geometry_inliers):
            p.geometry = refit(p.geometry, full, fit_to(p.item_id))


def _refit_regions(
    pairs: Sequence[Pair],
    box_of: Callable[[Pair], tuple[float, float, float, float] | None],
    full: Image.Image,
    geometric: GeometricTier,
    load: Callable[[int], Image.Image | None],
    digests: dict[int, str],
    partners: Sequence[int] = (),
) -> None:
    """``pairs`` (``needs_region_refit``) fitted on the crop of their region ``box_of(pair)``,
    one crop per region: the tight crop (``REGION_MARGINS[0]``), then the wide one for the
    pairs whose tight fit found the corpus image but not a copy (``needs_wide_crop``). Each
    crop is matched against its region's pairs and the ``partners`` (corpus items whose fits
    took part in an overlay pair, ``burstiness``: the crop's fits are judged for a shared
    overlay among the same corpus images); each pair keeps the better fit."""
    from splitaudit.indexer.match.inset_refit import (
        REGION_MARGINS,
        better,
        crop_fits,
        needs_wide_crop,
    )

    others = list(dict.fromkeys(partners))  # each partner once, in order

    def fit_regions(pairs: Sequence[Pair], margin: float) -> dict[int, GeometricMatch]:
        """Each pair fitted on its region's crop widened by ``margin``, the better fit kept;
        the crop's own fits (whole test image) by item id."""
        by_region: dict[tuple[float, float, float, float], list[Pair]] = defaultdict(list)
        for p in pairs:
            box = box_of(p)
            assert box is not None
            by_region[box].append(p)
        fits: dict[int, GeometricMatch] = {}
        for region, nominated in by_region.items():
            # one crop, its keypoints found once, for every pair this region nominated
            own = [p.item_id for p in nominated]
            ids = own + [i for i in others if i not in own]

            def fit(crop: Image.Image, ids: list[int] = ids) -> list[GeometricMatch]:
                return geometric.match(crop, ids, load, digests)

            found = crop_fits(full, fit, region, margin)
            if found is None:
                continue
            for p, again in zip(nominated, found[: len(nominated)], strict=True):
                fits[p.item_id] = again
                p.geometry = better(p.geometry if p.geometry is not None else again, again)
        return fits

    tight_margin, wide_margin = REGION_MARGINS
    tight = fit_regions(pairs, tight_margin)
    fit_regions(
        [p for p in pairs if p.item_id in tight and needs_wide_crop(tight[p.item_id])], wide_margin
    )


def _region_refit(p: Pair, th: Thresholds) -> bool:
    """Whether ``p`` is due a fit on the crop of the region that nominated it."""
    return p.region is not None and needs_region_refit(
        p.geometry, p.region_cosine, p.cosine, th.geometry_inliers, th.near_cosine
    )


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


def _open_pairs(pairs: list[Pair], th: Thresholds) -> list[Pair]:
    """The pairs a verification score could decide (``Thresholds.needs_verify_many``, asked
    once for all of them) or that a region nominated, in their order; byte-identical pairs
    are decided already."""
    pairs = [p for p in pairs if not p.digest_equal]
    needed = th.needs_verify_many(
        [p.hamming for p in pairs],
        [p.cosine for p in pairs],
        [p.min_side for p in pairs],
        [p.shape for p in pairs],
    )
    return [
        p for p, n in zip(pairs, needed.tolist(), strict=True) if n or p.region_cosine is not None
    ]
