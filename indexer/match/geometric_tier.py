"""The audit's geometric step: which candidate pairs get a geometric match, and running it.

Geometric verification (``splitaudit.indexer.match.geometry``) costs a SIFT detection per image and a
descriptor match per pair, so it runs only where the cheap tiers cannot settle a pair: a
large pair (both images at least ``small_side``; SIFT has too little to work with on
thumbnails, where the pixel verifier decides) whose cosine nominates it
(>= ``candidate_cosine``) and which no hash or pixel verification has made near. Per test
image, every such pair with cosine >= ``near_cosine`` is matched, plus the
``GEOMETRY_CAP`` best-ranked others, plus (up to ``CONFIRM_CAP``) the large pairs a hash or
the verifier already made near: a fit on a shared overlay alone (a frame, window chrome, a
logo, which also bring two hashes close) then vetoes them (``GeometricMatch.support``). Corpus keypoints are kept in a bounded LRU cache.
Keypoints are detected on a few threads (one detection per core) while the images decode, and
the caller goes on to the next test image while they run. Each image's keypoints carry its
small grayscale pixels for the content check (``splitaudit.indexer.match.content_check``);
keypoints read back from the verification store do not, so a fit that would count gets its
corpus image loaded for the check (``GeometricTier._check_content``). Then the fits of one
test image are looked at together (``splitaudit.indexer.match.burstiness``): a fit that stands
on keypoints the test image shares with other, different corpus images (a shared overlay)
vetoes its pair.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from splitaudit.indexer.cpus import usable_cpus
from splitaudit.indexer.match.burstiness import discount_shared
from splitaudit.indexer.match.geometry import (
    NO_MATCH,
    GeometricMatch,
    Keypoints,
    as_test_image,
    checked,
    keypoints,
    keypoints_async,
    match_many,
    needs_check,
)
from splitaudit.indexer.match.thresholds import Thresholds

if TYPE_CHECKING:
    from splitaudit.indexer.match.verify_store import VerifyStore

log = logging.getLogger(__name__)

GEOMETRY_CAP = 5  # pairs per test image below near_cosine
CONFIRM_CAP = 32  # pairs per test image already near by hash / verification, to confirm
KEYPOINT_CACHE = 4_096  # corpus images' keypoints kept (~300 KiB each, +~27 KiB of pixels)


def shortlist(
    cosines: Sequence[float | None],
    settled: Sequence[bool],
    min_sides: Sequence[int | None],
    th: Thresholds,
    cap: int | None = None,
) -> list[int]:
    """Indices of one test image's candidate pairs to match geometrically, best cosine first,
    then the large pairs already near by hash or verification (up to ``CONFIRM_CAP``, lowest
    cosine first): their fit's content check confirms they rest on content, or refuses them
    as a shared overlay (a negative support: ``Thresholds.near_mask``). ``cap``: the open
    pairs below ``near_cosine`` matched (default ``GEOMETRY_CAP``)."""
    cap = GEOMETRY_CAP if cap is None else cap
    open_pairs = [
        i
        for i, (cos, done, side) in enumerate(zip(cosines, settled, min_sides, strict=True))
        if not done
        and cos is not None
        and cos >= th.candidate_cosine
        and (side is None or side >= th.small_side)
    ]
    ranked = sorted(open_pairs, key=lambda i: -float(cosines[i] or 0.0))
    picked = [
        i for n, i in enumerate(ranked) if n < cap or float(cosines[i] or 0.0) >= th.near_cosine
    ]
    near = [
        i
        for i, (done, side) in enumerate(zip(settled, min_sides, strict=True))
        if done and side is not None and side >= th.small_side
    ]
    near.sort(key=lambda i: _cosine_or(cosines[i], -2.0))
    return picked + near[:CONFIRM_CAP]


def _cosine_or(cosine: float | None, missing: float) -> float:
    return missing if cosine is None or cosine != cosine else float(cosine)  # != : NaN


def zoom_in_mask(
    cosines: Sequence[float | None], min_sides: Sequence[int | None], th: Thresholds
) -> list[bool]:
    """Which of one test image's verification candidates need the verifier's zoom-in search.

    The zoom-in search (a crop showing 60-80% of the corpus image's side) costs most of the
    verifier's time, and on a large pair the geometric match finds such crops anyway (and
    heavier ones). It is kept where the geometric match never runs: small pairs (either
    image below ``small_side``) and pairs without a cosine (no embedding nominates them).
    """
    small = th.small_mask(np.asarray([np.nan if s is None else s for s in min_sides], float))
    no_cosine = [c is None or c != c for c in cosines]  # c != c: NaN
    return [bool(s) or n for s, n in zip(small.tolist(), no_cosine, strict=True)]


# A corpus image's keypoints: found, being detected (on the detection threads), or None (its
# image cannot be read).
KeypointsEntry = Keypoints | Future[Keypoints] | None


class KeypointCache:
    """Corpus images' keypoints by item id, least recently used dropped first."""

    def __init__(self, capacity: int = KEYPOINT_CACHE) -> None:
        self.capacity = capacity
        self._items: OrderedDict[int, KeypointsEntry] = OrderedDict()
        self._unstored: list[tuple[str | None, Future[Keypoints]]] = []  # detections to store

    def get_many(
        self,
        item_ids: Sequence[int],
        load: Callable[[int], Image.Image | None],
        detect_in: Executor | None = None,
        store: VerifyStore | None = None,
        digests: Mapping[int, str] | None = None,
    ) -> list[KeypointsEntry]:
        """The keypoints of each item (order kept; ``None``: its image cannot be read), detected on
        first use: images are loaded here, one after the other. With ``detect_in`` their
        keypoints are detected there and the entry is the detection's future, so the caller
        goes on while they run (``resolve`` waits for one). With a ``store``, keypoints kept by
        an earlier audit (by the item's SHA-256 in ``digests``) are read from it, and new ones
        are put there (detections once done: ``store_detected``)."""
        known: dict[int, KeypointsEntry] = {}
        digests = digests or {}
        stored: dict[str, Keypoints] = {}
        if store is not None:
            self.store_detected(store)
            stored = store.keypoints(
                digests[i] for i in item_ids if i not in self._items and i in digests
            )
        for item_id in item_ids:
            if item_id in known:
                continue
            if item_id in self._items:
                self._items.move_to_end(item_id)
                known[item_id] = self._items[item_id]
                continue
            if digests.get(item_id) in stored:
                known[item_id] = stored[digests[item_id]]
                self._put(item_id, known[item_id])
                continue
            image = load(item_id)
            if image is None:
                known[item_id] = None
            elif detect_in is None:
                known[item_id] = found = keypoints(image)
                if store is not None:
                    store.put_keypoints(digests.get(item_id), found)
            else:
                known[item_id] = job = detect_in.submit(keypoints, image)
                if store is not None:
                    self._unstored.append((digests.get(item_id), job))
            self._put(item_id, known[item_id])
        return [known[item_id] for item_id in item_ids]

    def store_detected(self, store: VerifyStore, wait: bool = False) -> None:
        """Put the finished detections (``wait``: all of them) into ``store``, on this thread."""
        pending = []
        for digest, job in self._unstored:
            if wait or job.done():
                store.put_keypoints(digest, job.result())
            else:
                pending.append((digest, job))
        self._unstored = pending

    def with_pixels(self, item_id: int, found: Keypoints) -> None:
        """Replace an item's cached keypoints by ``found`` (the same, with their pixels)."""
        if item_id in self._items:
            self._items[item_id] = found

    def _put(self, item_id: int, found: KeypointsEntry) -> None:
        self._items[item_id] = found
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)


def resolve(entry: KeypointsEntry) -> Keypoints | None:
    """The keypoints of a ``KeypointCache`` entry, waiting for its detection if it runs."""
    return entry.result() if isinstance(entry, Future) else entry


class GeometricTier:
    """Runs geometric matches for an audit and accounts for their time."""

    def __init__(
        self,
        cache: KeypointCache | None = None,
        threads: int | None = None,
        store: VerifyStore | None = None,
    ) -> None:
        self.cache = cache or KeypointCache()
        self.store = store  # keypoints kept between audits (splitaudit.indexer.match.verify_store)
        # SIFT detection releases the GIL, and one detection uses one core (OpenCV's own
        # threads barely help it): detect the test image and the corpus images side by side.
        self.threads = max(1, threads if threads is not None else usable_cpus())
        self._pool: ThreadPoolExecutor | None = None  # one for the audit: threads keep their arenas
        self._matcher: ThreadPoolExecutor | None = None
        self.pairs = 0
        self.seconds = 0.0

    def close(self) -> None:
        """Store the detections still unstored, and stop the detection and matching threads (a
        later ``match`` starts them again)."""
        try:
            if self.store is not None:
                self.cache.store_detected(self.store, wait=True)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        for pool in (self._pool, self._matcher):
            if pool is not None:
                pool.shutdown()
        self._pool = self._matcher = None

    def match(
        self,
        query: Image.Image,
        item_ids: Sequence[int],
        load: Callable[[int], Image.Image | None],
        digests: Mapping[int, str] | None = None,
    ) -> list[GeometricMatch]:
        """Geometric match of one test image against corpus items (order kept); ``digests``
        (item id -> SHA-256) name the corpus images in the store, when there is one."""
        return self.submit(query, item_ids, load, digests)()

    def submit(
        self,
        query: Image.Image,
        item_ids: Sequence[int],
        load: Callable[[int], Image.Image | None],
        digests: Mapping[int, str] | None = None,
        query_item: int | None = None,
    ) -> Callable[[], list[GeometricMatch]]:
        """``match``, returning at once: call the result to get the matches.

        The keypoints are detected on the detection threads, and the matching runs on a
        thread of its own once they are found, so the caller prepares the next test image
        meanwhile (the same matches, computed in the same order). Corpus images are loaded,
        and the store read and written, here, on the caller's thread. ``query_item``: the
        corpus item the test image is (a dedup): its keypoints are the corpus cache's entry
        for it (and the store's), so an image is detected once whether it is asked as a test
        image or as a candidate first.
        """
        if not item_ids:
            return lambda: []
        started = time.perf_counter()
        self.pairs += len(item_ids)
        if self.threads == 1:
            query_points = self._query_keypoints(query, query_item, None, digests)()
            references = self.cache.get_many(item_ids, load, None, self.store, digests)
            done = self._check_content(
                _match_references(lambda: query_points, references), item_ids, load
            )
            self.seconds += time.perf_counter() - started
            return lambda: done
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="keypoints")
        if self._matcher is None:
            self._matcher = ThreadPoolExecutor(1, thread_name_prefix="matching")
        query_job = self._query_keypoints(query, query_item, self._pool, digests)
        references = self.cache.get_many(item_ids, load, self._pool, self.store, digests)
        job = self._matcher.submit(_match_references, query_job, references)
        self.seconds += time.perf_counter() - started

        def result() -> list[GeometricMatch]:
            waited = time.perf_counter()
            out = self._check_content(job.result(), item_ids, load)
            self.seconds += time.perf_counter() - waited
            return out

        return result

    def _query_keypoints(
        self,
        query: Image.Image,
        query_item: int | None,
        pool: Executor | None,
        digests: Mapping[int, str] | None,
    ) -> Callable[[], Keypoints]:
        """The test image's keypoints, plain and mirrored, detected in ``pool`` (None: here);
        a corpus item's (``query_item``) through the corpus cache: found there or in the store,
        else detected and put there. Call the result to wait for them."""
        if query_item is None:
            if pool is None:
                found = keypoints(query, with_mirror=True)
                return lambda: found
            return keypoints_async(query, pool)  # plain and mirror side by side
        (entry,) = self.cache.get_many([query_item], lambda _item: query, pool, self.store, digests)
        if isinstance(entry, Future):
            return lambda: as_test_image(entry.result(), query)
        assert entry is not None  # its image is ``query``, which was read
        found = as_test_image(entry, query)  # read back, maybe without pixels: added here
        return lambda: found

    def _check_content(
        self,
        found: Matched,
        item_ids: Sequence[int],
        load: Callable[[int], Image.Image | None],
    ) -> list[GeometricMatch]:
        """The matches, with the content check done where the corpus image's pixels were
        missing (keypoints read from the store): its image is loaded for it, on this thread.
        Only fits that would otherwise count get there, so this is rare. Then the inliers the
        fits share with fits to different corpus images are counted
        (``burstiness.discount_shared``: a shared overlay)."""
        query, references, matches = found
        out = []
        checked_refs: list[Keypoints | None] = []
        for item_id, reference, match in zip(item_ids, references, matches, strict=True):
            if reference is not None and reference.pixels is None and needs_check(match):
                image = load(item_id)
                if image is not None:
                    reference = reference.with_pixels(image)
                    self.cache.with_pixels(item_id, reference)
                    side = query.mirrored if match.mirrored else query
                    if side is not None:
                        match = checked(match, side, reference)
            out.append(match)
            checked_refs.append(reference)
        return discount_shared(query, checked_refs, out)

    def log_cost(self, total_seconds: float) -> None:
        """Log how many pairs were matched and the share of the audit's time it took."""
        if self.pairs:
            share = self.seconds / max(total_seconds, 1e-9)
            log.info(
                "geometric verification: %d pairs in %.1f s (%.0f%% of matching time)",
                self.pairs,
                self.seconds,
                100 * share,
            )


# what the matching thread hands back: the query's keypoints, the references' and the matches
Matched = tuple[Keypoints, list[Keypoints | None], list[GeometricMatch]]


def _match_references(query: Callable[[], Keypoints], entries: Sequence[KeypointsEntry]) -> Matched:
    """``match_many`` of the query against the references that could be read (order kept),
    once their keypoints are found."""
    references = [resolve(e) for e in entries]
    query_points = query()
    found = iter(match_many(query_points, [r for r in references if r is not None]))
    return query_points, references, [NO_MATCH if r is None else next(found) for r in references]
