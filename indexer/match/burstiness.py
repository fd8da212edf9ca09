"""Query-time burstiness: keypoints of the test image that fits to several *different* corpus
images rest on, where the test image shows neither photo, are a shared overlay.

A watermark, a logo, caption bands, a frame or a window's chrome is drawn over many corpus
images: its keypoints in the test image match every one of them at once (classic
"burstiness" in image retrieval), while the test image's own content matches one photo and
its copies. After the geometric fits of one test image against its candidates
(``geometry.match_many``, then the content checks), ``discount_shared`` looks at the fits
that share inlier test keypoints:

1. two fits sharing at least ``SHARED_MIN`` inlier keypoints get a three-way comparison
   (``content_check.three_way``): the test image and the second corpus image aligned onto the
   first through the fits, the cells where the two corpus images differ, and those of them
   where the test image agrees with either. When the corpus images differ in at least
   ``MIN_DIFFERING`` cells and the test image agrees with neither in at least ``NEITHER`` of
   them, the two fits are an *overlay pair* (``overlay_pair``): what the test image shares
   with them is what they share with each other. Copies of one photo agree with each other;
   a copy of either agrees with it where they differ: neither is an overlay pair;
2. each fit with overlay partners counts the inliers it shares with them
   (``GeometricMatch.shared``, ``shared_with``) and the test image's agreement with its
   corpus image where the two differ (``beside_shared``, the best over its partners).

``GeometricMatch.on_shared`` then makes such a fit an overlay fit (aligned as they are, one
template over both images, or fewer than ``geometry.MIN_INLIERS`` own inliers): its support
is ``-inliers``, which vetoes the pair for every near rule, with the reason in its evidence;
other fits count their own inliers only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from itertools import combinations

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.match.content_check import ThreeWay, three_way
from splitaudit.indexer.match.geometry import CHECK_FROM, GeometricMatch, Keypoints

SHARED_MIN = 3  # shared inliers from which two fits' corpus images are compared
MIN_OTHERS = 1  # overlay partners a test keypoint must be an inlier of to count as shared
# Share of the cells where two corpus images differ in which the test image agrees with
# neither, from which the pair shares only an overlay with it, and the fewest such differing
# cells (of a 96 px grid's ~48) to judge on (docs/thresholds.md).
NEITHER = 0.5
MIN_DIFFERING = 12
MAX_COMPARISONS = 64  # corpus-corpus comparisons per test image (the fits with most inliers first)


def discount_shared(
    query: Keypoints,
    references: Sequence[Keypoints | None],
    matches: Sequence[GeometricMatch],
) -> list[GeometricMatch]:
    """``matches`` (one test image's fits to ``references``, order kept) with the inliers they
    share with fits to different corpus images counted (``GeometricMatch.shared``).

    Fits without their keypoint indices, their transform or both images' pixels are kept as
    they are (nothing to compare them with)."""
    if len(references) != len(matches):
        raise ValueError(
            f"discount_shared needs one match per reference, got {len(matches)} matches for "
            f"{len(references)} references"
        )
    fits = [
        n
        for n, (ref, m) in enumerate(zip(references, matches, strict=True))
        if _comparable(query, ref, m)
    ]
    if len(fits) < 2:
        return list(matches)
    fits.sort(key=lambda n: -matches[n].inliers)
    inliers = {n: _inlier_set(matches[n]) for n in fits}
    others: dict[int, list[int]] = {n: [] for n in fits}  # overlay partners
    beside: dict[int, float] = {}  # the test image's agreement with it beside the overlay
    compared = 0
    for a, b in combinations(fits, 2):
        if matches[a].mirrored != matches[b].mirrored:
            continue  # the transforms are of different query sides
        if len(inliers[a] & inliers[b]) < SHARED_MIN:
            continue
        if compared >= MAX_COMPARISONS:
            break
        compared += 1
        found = overlay_pair(query, matches[a], references[a], matches[b], references[b])
        if found is None:
            continue
        others[a].append(b)
        others[b].append(a)
        for n, agreeing in ((a, found.with_a), (b, found.with_b)):
            share = agreeing / found.differing
            beside[n] = max(beside.get(n, 0.0), share)
    out = list(matches)
    for n in fits:
        if not others[n]:
            continue
        counts = Counter(k for b in others[n] for k in inliers[n] & inliers[b])
        shared = {k for k, c in counts.items() if c >= MIN_OTHERS}
        out[n] = replace(
            matches[n], shared=len(shared), shared_with=len(others[n]), beside_shared=beside[n]
        )
    return out


def _comparable(query: Keypoints, reference: Keypoints | None, match: GeometricMatch) -> bool:
    side = query.mirrored if match.mirrored else query
    return (
        reference is not None
        and reference.pixels is not None
        and side is not None
        and side.pixels is not None
        and match.plausible
        and match.inliers >= CHECK_FROM
        and match.inlier_queries is not None
        and len(match.transform) == 6
    )


def _inlier_set(match: GeometricMatch) -> set[int]:
    assert match.inlier_queries is not None
    return set(match.inlier_queries.tolist())


def _matrix(match: GeometricMatch) -> npt.NDArray[np.float64]:
    return np.vstack([np.asarray(match.transform, np.float64).reshape(2, 3), [0.0, 0.0, 1.0]])


def overlay_pair(
    query: Keypoints,
    a: GeometricMatch,
    reference_a: Keypoints | None,
    b: GeometricMatch,
    reference_b: Keypoints | None,
) -> ThreeWay | None:
    """The three-way comparison of the test image with the corpus images of fits ``a`` and
    ``b`` (which share test keypoints) when it shows an overlay pair: the two corpus images
    differ in at least ``MIN_DIFFERING`` cells and the test image agrees with neither in at least
    ``NEITHER`` of them (what it shares with them is what they share with each other); None
    otherwise (copies of one photo agree with each other, and a copy of either agrees with it
    where they differ)."""
    side = query.mirrored if a.mirrored else query
    if side is None or side.pixels is None or reference_a is None or reference_b is None:
        return None
    if reference_a.pixels is None or reference_b.pixels is None:
        return None
    try:
        b_to_a = (_matrix(a) @ np.linalg.inv(_matrix(b)))[:2]
    except np.linalg.LinAlgError:
        return None
    found = three_way(
        side.pixels,
        (side.width, side.height),
        reference_a.pixels,
        (reference_a.width, reference_a.height),
        reference_b.pixels,
        (reference_b.width, reference_b.height),
        _matrix(a)[:2],
        b_to_a,
    )
    if found is None or found.differing < MIN_DIFFERING or found.neither < NEITHER:
        return None
    return found
