"""Geometric verification: does the test image show a region of the corpus image (crop, rotation),
or the corpus image inside itself (an inset)?

The pixel verifier (``splitaudit.indexer.match.verify``) aligns 32x32 thumbnails over small shifts and
scales, so it cannot find a quarter of a picture inside the whole, nor a copy rotated by
10 degrees. This module decides those pairs the way classic copy detection does:

1. SIFT keypoints and descriptors of each image, in grayscale at a working size
   (``keypoints``; OpenCV, no weights), half of them the strongest, half spread over a grid
   (``_spread``: a frame's ornament or a window's chrome must not take the whole budget);
2. descriptor matching with Lowe's ratio test, so repeated texture (bricks, gravel, grass),
   whose descriptors have many near-equal neighbours, contributes no matches;
3. RANSAC fit of a similarity transform (scale, rotation, translation) from the test image
   to the corpus image (``match_keypoints``), mirrored test image too (its keypoints are the
   test image's, reflected: ``_reflected``, no second detection); where a homography fitted to
   the same matches explains clearly more of them and draws the corpus image as a flat
   picture seen at an angle would be (a photo of a screen or a print: ``_perspective``), the
   fit is that homography (``GeometricMatch.perspective``);
4. the content check (``splitaudit.indexer.match.content_check``): the test image aligned onto
   the corpus image by the fit must agree with it over most of the overlap, not only where the
   inliers are, or the fit rests on a shared overlay (a tiled watermark, a logo, caption
   bands, a frame, window chrome) and is refused (``GeometricMatch.overlay_only``); so is a fit
   of two images aligned as they are whose inliers all sit around the middle (caption bands,
   a frame) or whose agreeing cells agree in texture only (a tiled semi-transparent watermark
   over two smooth photos: ``GeometricMatch.on_template``);
5. the pair *shares pixels* when at least ``MIN_INLIERS`` matches agree with one transform
   whose scale and angle are plausible for a copy and which passed the content check
   (``GeometricMatch.is_copy``).

Two different regions of one scene (no shared pixels) give matches scattered over many
incompatible transforms, so few of them survive RANSAC; a crop of the same pixels gives
dozens to hundreds of inliers. The evidence kept for a match is the region of the corpus
image the test image covers (``box``, fractions of the corpus image's width / height), the
corpus image's footprint on the test image (``test_box``: where an inset copy sits in a
screenshot, collage or slide; ``inset`` when it is smaller than the test image), the scale
(region side / corpus side), the rotation angle, and the content check (the agreeing share
and the content region; ``discarded`` when the fit was refused as an overlay), which the
report and the review UI draw as boxes on the two images.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.match.content_check import (
    ContentAgreement,
    content_agreement,
    content_pixels,
    covered,
    project,
)

WORK_SIDE = 384  # long side, px, at which keypoints are detected
MAX_FEATURES = 600
RATIO = 0.75  # Lowe's ratio test
CONTRAST = 0.01  # SIFT contrast threshold: low, for smooth photos (cells, a clock face, the moon)
RANSAC_PX = 0.015  # reprojection tolerance, as a fraction of the corpus image's long side
MIN_INLIERS = 12  # the calibrated default (docs/thresholds.md); Thresholds.geometry_inliers
MAX_ANGLE = 20.0  # degrees: copies are rotated by a few degrees, not turned over
MIN_REGION = 0.3  # the located region's side, as a fraction of the corpus image's side
MAX_REGION = 1.6  # > 1: the test image has a border or padding around the corpus image
# Or the corpus image is inset in a larger test image (a screenshot, collage, slide): its
# footprint must span at least this share of the test image's width or height.
MIN_INSET = 0.25
CHECK_FROM = 3  # inliers from which a plausible fit gets the content check
# A refused fit vetoes the other near rules only at the identity alignment (a template shared
# by both images) with its inliers in under this share of the 4 x 4 cells (docs/thresholds.md).
VETO_COVERAGE = 0.625
VETO_ANGLE = 2.0
# Inliers a fit of two images aligned as they are must have in the middle 2 x 2 of the 4 x 4
# cells: without any, they sit on caption bands, a frame or chrome around the photos.
MIN_CENTRAL = 1

Box = tuple[float, float, float, float]

# A photo of a screen or a print shows the corpus image in perspective, which one similarity
# fits only in a band of it: a homography fitted to the same matches is taken instead where it
# holds at least PERSPECTIVE_FROM inliers, PERSPECTIVE_GAIN times the similarity's and
# PERSPECTIVE_MORE more (4 points fit a homography exactly: a wrong pair's ratio matches give
# it 4-6 inliers, bench.screen_photos), and the corpus image's corners it draws on the test
# image are a convex quad seen at most about 40 degrees off (``_perspective_plausible``).
PERSPECTIVE_FROM = 8
PERSPECTIVE_GAIN = 1.2
PERSPECTIVE_MORE = 4
MIN_SIDE_RATIO = 0.5  # shorter / longer of two opposite sides of the quad
MAX_SKEW = 40.0  # degrees: each corner of the quad within 90 +- this


@dataclass(frozen=True)
class Keypoints:
    """One image's SIFT keypoints (pixel coordinates at the working size) and descriptors."""

    points: npt.NDArray[np.float32]  # (n, 2) x, y
    descriptors: npt.NDArray[np.float32]  # (n, 128)
    width: int
    height: int
    mirrored: Keypoints | None = None  # the same image flipped left-right (query side only)
    # the grayscale image at ``content_check.CONTENT_SIDE`` (None: not kept, e.g. read from the
    # verification store; ``with_pixels`` adds it)
    pixels: npt.NDArray[np.uint8] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.points)

    def with_pixels(self, image: Image.Image) -> Keypoints:
        """These keypoints with the content-check pixels of ``image`` (the image they are of)."""
        return replace(self, pixels=content_pixels(_working_gray(image)))

    @cached_property
    def exact_norms(self) -> npt.NDArray[np.float32] | None:
        """``_exact_integers`` of the descriptors, computed once (corpus keypoints are matched
        against many test images)."""
        return _exact_integers(self.descriptors)

    @cached_property
    def scaled_descriptors(self) -> npt.NDArray[np.float32]:
        """-2 x the descriptors (exact for ``exact_norms`` descriptors): the query side of
        ``_partial_distances``."""
        scaled: npt.NDArray[np.float32] = self.descriptors * np.float32(-2.0)
        return scaled


@dataclass(frozen=True)
class GeometricMatch:
    """The best similarity transform (or homography: ``perspective``) from a test image into a
    corpus image, and its support."""

    inliers: int
    matches: int  # ratio-test matches before RANSAC
    scale: float = 0.0  # side of the located region / side of the corpus image
    angle: float = 0.0  # degrees, counter-clockwise, of the test image relative to the corpus
    box: Box = (
        0.0,
        0.0,
        0.0,
        0.0,
    )  # located region: x0, y0, x1, y1 as fractions of the corpus image
    mirrored: bool = False
    # the corpus image's footprint on the test image (fractions of the test image): where an
    # inset copy sits in a larger test image
    test_box: Box = (0.0, 0.0, 0.0, 0.0)
    # 2 x 3 transform, row-major: test working px -> corpus working px (mirrored test image
    # when ``mirrored``)
    transform: tuple[float, ...] = field(default=(), repr=False)
    # 3 x 3 homography, row-major (test working px -> corpus working px) where the fit is one in
    # perspective (a photo of a screen); ``transform`` is then the similarity nearest to it
    perspective: tuple[float, ...] = field(default=(), repr=False)
    coverage: float = 0.0  # share of 4 x 4 cells of the overlap holding an inlier
    # inliers in the middle 2 x 2 of those cells (None: not counted)
    central: int | None = None
    # the inliers' corpus-side points (corpus working px)
    inlier_points: npt.NDArray[np.float32] | None = field(default=None, repr=False, compare=False)
    # the inliers' test-image keypoint indices (the same index plain or mirrored)
    inlier_queries: npt.NDArray[np.intp] | None = field(default=None, repr=False, compare=False)
    # agreement of the aligned images around the inliers (None: not checked); derived from the
    # pixels, not part of the fit, so two equal fits compare equal whether checked or not
    content: ContentAgreement | None = field(default=None, compare=False)
    # inliers on test keypoints that fits to other, different corpus images of the same test
    # image rest on too (a shared overlay: ``burstiness.discount_shared``), how many such
    # images, and the content agreement over the cells holding none of those inliers
    shared: int = field(default=0, compare=False)
    shared_with: int = field(default=0, compare=False)
    beside_shared: float | None = field(default=None, compare=False)

    @property
    def inset_side(self) -> float:
        """The corpus image's footprint on the test image: the larger of its width and height,
        as fractions of the test image's."""
        x0, y0, x1, y1 = self.test_box
        return max(x1 - x0, y1 - y0)

    @property
    def plausible(self) -> bool:
        """Whether the transform is one a copy would have: region size and angle in range."""
        if abs(self.angle) > MAX_ANGLE or self.scale < MIN_REGION:
            return False
        return self.scale <= MAX_REGION or self.inset_side >= MIN_INSET

    @property
    def overlay_only(self) -> bool:
        """Whether the content check refused the fit: the aligned images agree only where the
        inliers are (a shared watermark, logo, caption band, frame or window chrome), or, aligned
        as they are, only on a template (``on_template``)."""
        return self.content is not None and (not self.content.passed or self.on_template)

    @property
    def on_template(self) -> bool:
        """Whether a fit that passed the content check, with the two images aligned as they are
        (``aligned``: one template drawn over both), still rests on the template alone: no
        inlier in the middle 2 x 2 of the 4 x 4 cells (the inliers sit on caption bands, a
        frame, a window's chrome around the photo), or the agreeing cells agree in texture only
        (``ContentAgreement.texture_only``: a semi-transparent watermark tiled over two smooth
        photos, whose brightness under the strokes differs). Refused, not vetoing: a copy with
        such an overlay removed keeps its hash and verifier rules (docs/thresholds.md)."""
        if self.content is None or not self.content.passed or not self.aligned:
            return False
        around = self.central is not None and self.central < MIN_CENTRAL
        return around or self.content.texture_only

    @property
    def own_inliers(self) -> int:
        """The inliers on keypoints no fit to a different corpus image rests on."""
        return self.inliers - self.shared

    @property
    def aligned(self) -> bool:
        """Whether the two images are aligned as they are: both boxes the whole image and no
        turn (one template drawn over both)."""
        full = (0.03, 0.03, 0.97, 0.97)
        whole = all(
            box[0] <= full[0] and box[1] <= full[1] and box[2] >= full[2] and box[3] >= full[3]
            for box in (self.box, self.test_box)
        )
        return whole and abs(self.angle) <= VETO_ANGLE

    @property
    def on_shared(self) -> bool:
        """Whether the fit stands on an overlay the test image shares with other, different
        corpus images (``burstiness.discount_shared``: where this corpus image and such another
        differ, the test image agrees with neither): the two images are aligned as they are
        (one template over both), or fewer than ``MIN_INLIERS`` inliers are the fit's own (and
        no more than it shares)."""
        if not self.shared_with:
            return False
        return self.aligned or (self.own_inliers < MIN_INLIERS and self.shared >= self.own_inliers)

    @property
    def support(self) -> int:
        """What ``Thresholds`` compares: the own inliers (``own_inliers``) of a plausible
        transform that rests on content; minus the inliers of a fit on a *shared overlay*
        (``vetoes``: from ``geometry_inliers`` of them no rule makes the pair near); 0
        otherwise."""
        if self.vetoes:
            return -self.inliers
        return self.own_inliers if self.plausible and not self.overlay_only else 0

    @property
    def vetoes(self) -> bool:
        """Whether this fit shows the pair shares only an overlay: it stands on keypoints the
        fits to other, different corpus images share (``on_shared``), or the content
        check refused it with the two images aligned as they are (same frame, no turn: one
        template over both) and the inliers in a part of the image (a copy of a darkened or
        emoji-covered photo has them everywhere), or, aligned so, the agreeing cells' brightness
        layouts are unrelated (``ContentAgreement.texture_overlay``: a watermark over two smooth
        photos)."""
        if self.plausible and self.on_shared:
            return True
        if self.on_template and self.content is not None and self.content.texture_overlay:
            return True
        if not self.overlay_only or self.content is None or not self.content.overlay:
            return False
        return self.aligned and self.coverage < VETO_COVERAGE

    def is_copy(self, min_inliers: int = MIN_INLIERS) -> bool:
        """Whether enough matches agree on a plausible transform (scale, angle) to call it a copy."""
        return self.support >= min_inliers

    @property
    def inset(self) -> bool:
        """Whether the corpus image sits inside a larger test image (at most 90% of its side)."""
        return self.scale > 1.0 and self.inset_side <= 0.9

    def evidence(self) -> dict[str, Any]:
        """The JSON evidence of a match: inliers, scale, angle, the located region on the corpus
        image (``box``) and on the test image (``test_box``), and the content check."""
        ev: dict[str, Any] = {
            "inliers": self.inliers,
            "scale": round(self.scale, 3),
            "angle": round(self.angle, 1),
            "box": [round(v, 4) for v in self.box],
            "test_box": [round(v, 4) for v in self.test_box],
        }
        if self.inset:
            ev["inset"] = True
        if self.mirrored:
            ev["mirrored"] = True
        if self.perspective:
            ev["perspective"] = True
        if self.content is not None:
            ev["content"] = self.content.evidence()
        if self.shared:
            ev["shared"] = {"inliers": self.shared, "corpus_images": self.shared_with}
            if self.beside_shared is not None:
                ev["shared"]["agreement_beside_overlay"] = round(self.beside_shared, 3)
        if self.plausible and self.on_shared:
            ev["discarded"] = {"inliers": self.inliers, "reason": self.shared_reason()}
        elif self.content is not None and self.overlay_only:
            ev["discarded"] = {"inliers": self.inliers, "reason": self.refusal_reason()}
        return ev

    def refusal_reason(self) -> str:
        """Why the content check (or ``on_template``) refused the fit, in words."""
        assert self.content is not None
        if self.content.passed and not self.content.texture_only:
            return (
                f"overlay: {self.inliers} inliers, none in the middle of the image: they sit on "
                "a template around it (caption bands, a frame)"
            )
        return self.content.reason()

    def shared_reason(self) -> str:
        """Why a fit on shared keypoints was discarded, in words."""
        other = "image" if self.shared_with == 1 else "images"
        return (
            f"overlay: {self.shared} of {self.inliers} inliers on keypoints shared with "
            f"{self.shared_with} other corpus {other}"
        )


NO_MATCH = GeometricMatch(inliers=0, matches=0)


def _cv2() -> Any:
    """Import OpenCV lazily (heavy, and only the audit's geometric step needs it)."""
    import cv2

    return cv2


def working_size(width: int, height: int) -> tuple[int, int]:
    """The size keypoints are detected at: the long side at ``WORK_SIDE`` (the px the inliers'
    points are in)."""
    scale = WORK_SIDE / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _working_gray(image: Image.Image) -> npt.NDArray[np.uint8]:
    """Grayscale pixels with the long side at ``WORK_SIDE`` (small images are upscaled)."""
    gray = image if image.mode == "L" else image.convert("L")
    size = working_size(*gray.size)
    if size != gray.size:
        gray = gray.resize(size, Image.Resampling.BILINEAR)
    return np.asarray(gray, dtype=np.uint8)


def _detect(
    pixels: npt.NDArray[np.uint8],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    cv2 = _cv2()
    if not SPREAD_GRID:
        sift = cv2.SIFT_create(nfeatures=MAX_FEATURES, contrastThreshold=CONTRAST)
        found, descriptors = sift.detectAndCompute(pixels, None)
    else:
        sift = cv2.SIFT_create(nfeatures=0, contrastThreshold=CONTRAST)
        found = _spread(sift.detect(pixels, None), pixels.shape)
        descriptors = None
        if found:
            found, descriptors = sift.compute(pixels, found)
    if descriptors is None or not found:
        return np.zeros((0, 2), np.float32), np.zeros((0, 128), np.float32)
    points = np.array([kp.pt for kp in found], dtype=np.float32)
    return points, np.asarray(descriptors, dtype=np.float32)


# Keypoints are kept evenly over a SPREAD_GRID x SPREAD_GRID grid of the image (the strongest of
# each cell first, cell by cell), not the MAX_FEATURES strongest overall: a frame's ornament,
# a window's chrome or a caption's glyphs are high-contrast corners that would otherwise take
# the whole budget, and leave the photo inside them (what a copy shares) without keypoints.
SPREAD_GRID = 4
SPREAD_SHARE = 0.5  # of the budget; the rest goes to the strongest keypoints, wherever they are


def _spread(found: Sequence[Any], shape: tuple[int, ...]) -> list[Any]:
    """``MAX_FEATURES`` of the detected keypoints, spread over the grid: each cell's k-th
    strongest before any cell's (k+1)-th, ties by response."""
    if len(found) <= MAX_FEATURES:
        return list(found)
    height, width = shape[:2]
    points = np.array([kp.pt for kp in found], np.float64)
    response = np.array([kp.response for kp in found], np.float64)
    columns = np.minimum(points[:, 0] * SPREAD_GRID // width, SPREAD_GRID - 1)
    rows = np.minimum(points[:, 1] * SPREAD_GRID // height, SPREAD_GRID - 1)
    cell = (rows * SPREAD_GRID + columns).astype(np.intp)
    order = np.lexsort((-response, cell))  # by cell, strongest first within it
    starts = np.searchsorted(cell[order], np.arange(SPREAD_GRID * SPREAD_GRID))
    rank = np.empty(len(found), np.intp)
    rank[order] = np.arange(len(found)) - starts[cell[order]]
    strongest = np.argsort(-response, kind="stable")[: round(MAX_FEATURES * (1 - SPREAD_SHARE))]
    rank[strongest] = -1  # kept whatever their cell
    keep = np.lexsort((-response, rank))[:MAX_FEATURES]
    return [found[i] for i in np.sort(keep)]


def keypoints(image: Image.Image, *, with_mirror: bool = False) -> Keypoints:
    """SIFT keypoints of an image at the working size; ``with_mirror`` also for its mirror image.

    Pass ``with_mirror=True`` for the test image (a mirrored copy is still a copy); corpus
    images need only their own keypoints.
    """
    pixels = _working_gray(image)
    height, width = pixels.shape
    points, descriptors = _detect(pixels)
    return _keypoints(points, descriptors, width, height, with_mirror, content_pixels(pixels))


def as_test_image(found: Keypoints, image: Image.Image) -> Keypoints:
    """``found``, the keypoints of ``image`` (a corpus image's, detected or read back), as
    ``keypoints(image, with_mirror=True)`` gives them: the mirror image's reflected from them,
    and the content check's pixels taken from ``image`` where ``found`` has none."""
    if found.pixels is None:
        found = found.with_pixels(image)
    if found.mirrored is not None:
        return found
    return _keypoints(
        found.points, found.descriptors, found.width, found.height, True, found.pixels
    )


def _keypoints(
    points: npt.NDArray[np.float32],
    descriptors: npt.NDArray[np.float32],
    width: int,
    height: int,
    with_mirror: bool,
    pixels: npt.NDArray[np.uint8] | None = None,
) -> Keypoints:
    mirrored = _reflected(points, descriptors, width, height, pixels) if with_mirror else None
    return Keypoints(points, descriptors, width, height, mirrored, pixels)


def _descriptor_reflection() -> npt.NDArray[np.intp]:
    """Where each SIFT descriptor entry goes when the image is flipped left-right.

    OpenCV's descriptor is 4 x 4 cells (rows, columns of the keypoint's own frame, turned by
    its orientation) of 8 gradient-orientation bins. Flipping the image flips the keypoint's
    frame across its orientation axis: the cell rows run the other way and every gradient
    angle, relative to the orientation, changes sign.
    """
    order = np.empty(128, np.intp)
    for row in range(4):
        for column in range(4):
            for angle in range(8):
                order[((3 - row) * 4 + column) * 8 + (-angle) % 8] = (row * 4 + column) * 8 + angle
    return order


_REFLECTION = _descriptor_reflection()


def _reflected(
    points: npt.NDArray[np.float32],
    descriptors: npt.NDArray[np.float32],
    width: int,
    height: int,
    pixels: npt.NDArray[np.uint8] | None = None,
) -> Keypoints:
    """The keypoints of the image flipped left-right, from its own (no second detection).

    SIFT detects (nearly) the reflected keypoints on a reflected image, with the reflected
    descriptors; measured on photos, a mirrored crop + rotation gets the same inliers either
    way (docs/thresholds.md), at half the detection cost of the test image.
    """
    flipped = points.copy()
    flipped[:, 0] = (width - 1) - flipped[:, 0]
    mirror_pixels = None if pixels is None else np.ascontiguousarray(pixels[:, ::-1])
    return Keypoints(
        flipped,
        np.ascontiguousarray(descriptors[:, _REFLECTION]),
        width,
        height,
        pixels=mirror_pixels,
    )


def keypoints_async(image: Image.Image, pool: Executor) -> Callable[[], Keypoints]:
    """``keypoints(image, with_mirror=True)`` with the detection run in ``pool``; call the
    returned function to wait for it."""
    pixels = _working_gray(image)
    height, width = pixels.shape
    detection = pool.submit(_detect, pixels)
    kept = content_pixels(pixels)

    def result() -> Keypoints:
        return _keypoints(*detection.result(), width, height, with_mirror=True, pixels=kept)

    return result


def _ratio_matches(
    query: Keypoints, reference: Keypoints
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Matched point pairs (query, reference) that pass the ratio test, one per reference point."""
    return _points(query, reference, *_ratio_indices(query, reference))


def _ratio_indices(
    query: Keypoints, reference: Keypoints
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``_ratio_matches`` as keypoint indices (query, reference)."""
    if len(query) < 2 or len(reference) < 2:
        empty = np.zeros(0, np.intp)
        return empty, empty
    query_norms = query.exact_norms
    reference_norms = reference.exact_norms
    if query_norms is None or reference_norms is None:
        return _ratio_indices_opencv(query, reference)
    partial = _partial_distances(query.scaled_descriptors, reference.descriptors, reference_norms)
    return _ratio_from_distances(partial, query_norms)


def _points(
    query: Keypoints,
    reference: Keypoints,
    query_index: npt.NDArray[np.intp],
    reference_index: npt.NDArray[np.intp],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The matched keypoints' coordinates (query, reference)."""
    q = query.points[query_index].astype(np.float32).reshape(-1, 2)
    r = reference.points[reference_index].astype(np.float32).reshape(-1, 2)
    return q, r


def _ratio_from_distances(
    partial: npt.NDArray[np.float32],
    query_norms: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The (query, reference) keypoint indices of ``_ratio_matches`` from their
    ``_partial_distances`` (overwritten).

    The ratio test and "the closest query point per reference point" exactly as the DMatch
    loop of ``_ratio_matches_opencv`` does them: the same float comparisons on the same float32
    distances, ties to the lower query index, pairs in order of each reference point's first
    passing match.
    """
    first, p0, p1 = _two_nearest(partial)
    # Squared distance = query norm + partial, an exact integer; OpenCV's distance is its float32
    # square root, needed for the two nearest only.
    d0 = np.sqrt(query_norms + p0)
    d1 = np.sqrt(query_norms + p1)
    passing = np.flatnonzero(d0.astype(np.float64) < RATIO * d1.astype(np.float64))
    train = first[passing]
    ranked = np.lexsort((passing, d0[passing], train))
    _, group_start = np.unique(train[ranked], return_index=True)
    best_query = passing[ranked[group_start]]
    unique_train, first_seen = np.unique(train, return_index=True)
    order = np.argsort(first_seen, kind="stable")
    return best_query[order].astype(np.intp), unique_train[order].astype(np.intp)


# SIFT descriptors are small non-negative integers stored as float32: their squared
# distances and dot products are integers, exact in float32 below 2**24 whatever the order
# of summation, so one BLAS product gives OpenCV's brute-force distances bit for bit. With
# squared norms below 2**20 every squared distance is below 2**22, where distinct integers
# keep distinct float32 square roots: the nearest and second nearest by squared distance
# (what ``_two_nearest`` picks, ties included) are OpenCV's by distance.
_EXACT_NORM2 = 2.0**20


def _exact_integers(descriptors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32] | None:
    """Squared norms of the rows when every distance to them is exact in float32, else None."""
    if descriptors.dtype != np.float32 or not np.array_equal(descriptors, np.rint(descriptors)):
        return None
    if descriptors.size and float(descriptors.min()) < 0:
        return None
    norms = np.einsum("ij,ij->i", descriptors.astype(np.float64), descriptors.astype(np.float64))
    if norms.size and float(norms.max()) >= _EXACT_NORM2:
        return None
    return norms.astype(np.float32)


def _partial_distances(
    scaled_query: npt.NDArray[np.float32],
    reference: npt.NDArray[np.float32],
    reference_norms: npt.NDArray[np.float32],
) -> npt.NDArray[np.float32]:
    """Squared distances of every (query, reference) ``_exact_integers`` descriptor pair, less
    the query row's squared norm: ``reference norm - 2 q.r`` (``scaled_query`` = -2 q).

    One matrix product and one pass: every term is an integer of magnitude below 2**22, so
    the result is exact whatever the order of the sums, and the query norm, the same along a
    row, changes no row's order.
    """
    out: npt.NDArray[np.float32] = scaled_query @ reference.T
    out += reference_norms[None, :]
    return out


def _two_nearest(
    distances: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Per query row: the nearest reference column, its distance and the second nearest's.

    ``cv2.BFMatcher(NORM_L2).knnMatch(k=2)``'s choice (ties to the lower reference index:
    ``argmin`` takes the first of equal minima). Overwrites ``distances``.
    """
    rows = np.arange(len(distances))
    first = distances.argmin(axis=1)
    d0 = distances[rows, first]
    distances[rows, first] = np.inf
    d1 = distances[rows, distances.argmin(axis=1)]
    return first, d0, d1


def _ratio_matches_opencv(
    query: Keypoints, reference: Keypoints
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """``_ratio_matches`` through OpenCV's brute-force matcher (any descriptor values)."""
    return _points(query, reference, *_ratio_indices_opencv(query, reference))


def _ratio_indices_opencv(
    query: Keypoints, reference: Keypoints
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``_ratio_matches_opencv`` as keypoint indices (query, reference)."""
    cv2 = _cv2()
    knn = cv2.BFMatcher(cv2.NORM_L2).knnMatch(query.descriptors, reference.descriptors, k=2)
    best: dict[int, tuple[float, int]] = {}
    for pair in knn:
        if len(pair) == 2 and pair[0].distance < RATIO * pair[1].distance:
            m = pair[0]
            if m.trainIdx not in best or m.distance < best[m.trainIdx][0]:
                best[m.trainIdx] = (m.distance, m.queryIdx)
    q = np.array([qi for _, qi in best.values()], np.intp)
    r = np.array(list(best), np.intp)
    return q, r


def _fit(query: Keypoints, reference: Keypoints, mirrored: bool) -> GeometricMatch:
    """RANSAC similarity transform from ``query`` to ``reference`` and the region it locates."""
    query_index, reference_index = _ratio_indices(query, reference)
    q, r = _points(query, reference, query_index, reference_index)
    return checked(_fit_matches(q, r, query, reference, mirrored, query_index), query, reference)


def _fit_matches(
    q: npt.NDArray[np.float32],
    r: npt.NDArray[np.float32],
    query: Keypoints,
    reference: Keypoints,
    mirrored: bool,
    query_index: npt.NDArray[np.intp] | None = None,
) -> GeometricMatch:
    """``_fit`` from the ratio-test matches ``q`` -> ``r`` (``query_index``: the query keypoint
    of each, kept for the inliers)."""
    if len(q) < 3:
        return GeometricMatch(inliers=0, matches=len(q), mirrored=mirrored)
    cv2 = _cv2()
    tolerance = RANSAC_PX * max(reference.width, reference.height)
    transform, inlier_mask = cv2.estimateAffinePartial2D(
        q, r, method=cv2.RANSAC, ransacReprojThreshold=tolerance, maxIters=2000, confidence=0.995
    )
    if transform is None or inlier_mask is None:
        return GeometricMatch(inliers=0, matches=len(q), mirrored=mirrored)
    inliers = inlier_mask.ravel().astype(bool)
    homography = None
    found = _perspective(q, r, int(inliers.sum()), tolerance, reference)
    if found is not None:
        homography, inliers = found
        nearest, _mask = cv2.estimateAffinePartial2D(q[inliers], r[inliers], method=cv2.LMEDS)
        if nearest is not None:
            transform = nearest
    a, b = float(transform[0, 0]), float(transform[1, 0])
    pixel_scale = math.hypot(a, b)
    # Image y points down, so a positive atan2 is a clockwise turn of the test image into the
    # corpus: the test image itself is turned counter-clockwise (PIL's positive angle).
    angle = math.degrees(math.atan2(b, a))
    corners = np.array(
        [[0, 0], [query.width, 0], [query.width, query.height], [0, query.height]], np.float64
    )
    fitted = np.asarray(transform if homography is None else homography, np.float64)
    if homography is None:
        mapped = project(fitted, corners)
        box = (
            max(0.0, float(mapped[:, 0].min()) / reference.width),
            max(0.0, float(mapped[:, 1].min()) / reference.height),
            min(1.0, float(mapped[:, 0].max()) / reference.width),
            min(1.0, float(mapped[:, 1].max()) / reference.height),
        )
    else:  # the part of the corpus image the homography puts on the test image
        part = covered(homography, (query.width, query.height), (reference.width, reference.height))
        w, h = reference.width, reference.height
        box = (
            (0.0, 0.0, 0.0, 0.0)
            if part is None
            else (part[0] / w, part[1] / h, part[2] / w, part[3] / h)
        )
    # Region side relative to the corpus image: the test image's size mapped into it.
    region = pixel_scale * math.sqrt(
        (query.width * query.height) / (reference.width * reference.height)
    )
    matrix = np.asarray(transform, np.float64)
    return GeometricMatch(
        inliers=int(inliers.sum()),
        matches=len(q),
        scale=region,
        angle=angle,
        box=box,
        mirrored=mirrored,
        test_box=_test_box(fitted, query, reference),
        transform=tuple(float(v) for v in matrix.ravel()),
        perspective=() if homography is None else tuple(float(v) for v in homography.ravel()),
        coverage=_coverage(r[inliers], box, reference),
        central=_central(r[inliers], box, reference),
        inlier_points=r[inliers],
        inlier_queries=None if query_index is None else query_index[inliers],
    )


def _perspective(
    q: npt.NDArray[np.float32],
    r: npt.NDArray[np.float32],
    similar: int,
    tolerance: float,
    reference: Keypoints,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]] | None:
    """A homography of the matches ``q`` -> ``r`` and its inliers, where it explains enough
    more of them than the similarity's ``similar`` inliers (``PERSPECTIVE_*``) and is one a
    screen or a print seen at an angle has (``_perspective_plausible``); else None."""
    if len(q) < max(PERSPECTIVE_FROM, similar + PERSPECTIVE_MORE):
        return None
    cv2 = _cv2()
    found, mask = cv2.findHomography(q, r, cv2.RANSAC, tolerance, maxIters=2000, confidence=0.995)
    if found is None or mask is None:
        return None
    homography = np.asarray(found, np.float64)
    inliers = mask.ravel().astype(bool)
    count = int(inliers.sum())
    if count < max(PERSPECTIVE_FROM, PERSPECTIVE_GAIN * similar, similar + PERSPECTIVE_MORE):
        return None
    if not _perspective_plausible(homography, reference):
        return None
    return homography, inliers


def _perspective_plausible(homography: npt.NDArray[np.float64], reference: Keypoints) -> bool:
    """Whether the corpus image's corners, drawn on the test image by ``homography``'s inverse,
    make a quad a flat picture seen at an angle makes (``plausible_quad``)."""
    try:
        inverse = np.linalg.inv(homography)
    except np.linalg.LinAlgError:
        return False
    w, h = reference.width, reference.height
    corners = np.array([[0, 0, 1], [w, 0, 1], [w, h, 1], [0, h, 1]], np.float64) @ inverse.T
    if np.any(corners[:, 2] <= 0):  # a corner behind the camera
        return False
    return plausible_quad(corners[:, :2] / corners[:, 2:])


def plausible_quad(quad: npt.NDArray[np.float64]) -> bool:
    """Whether ``quad`` (4 x 2 image points, from the picture's top-left corner clockwise as
    seen on the image, y down) is what a flat picture seen at an angle makes: convex, the same
    way round (no mirror), each corner within ``MAX_SKEW`` of square and opposite sides at
    least ``MIN_SIDE_RATIO`` of each other."""
    sides = np.roll(quad, -1, axis=0) - quad  # corner i to corner i + 1
    lengths = np.hypot(sides[:, 0], sides[:, 1])
    if np.any(lengths <= 0):
        return False
    after = np.roll(sides, -1, axis=0)
    turns = sides[:, 0] * after[:, 1] - sides[:, 1] * after[:, 0]
    if not np.all(turns > 0):  # convex, clockwise on the image (y down) as the corpus corners
        return False
    cosines = -np.sum(sides * after, axis=1) / (lengths * np.roll(lengths, -1))
    if np.any(np.abs(90.0 - np.degrees(np.arccos(np.clip(cosines, -1, 1)))) > MAX_SKEW):
        return False
    ratios = np.minimum(lengths[:2], lengths[2:]) / np.maximum(lengths[:2], lengths[2:])
    return bool(np.all(ratios >= MIN_SIDE_RATIO))


def _test_box(transform: npt.NDArray[np.float64], query: Keypoints, reference: Keypoints) -> Box:
    """The corpus image's footprint on the test image (fractions of it, clipped); ``transform``
    2 x 3, or 3 x 3 (a perspective fit: the box around the quad)."""
    try:
        square = transform if transform.shape == (3, 3) else np.vstack([transform, [0, 0, 1.0]])
        inverse = np.linalg.inv(square)
    except np.linalg.LinAlgError:
        return (0.0, 0.0, 0.0, 0.0)
    w, h = reference.width, reference.height
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float64)
    mapped = project(inverse if transform.shape == (3, 3) else inverse[:2], corners)
    return (
        max(0.0, float(mapped[:, 0].min()) / query.width),
        max(0.0, float(mapped[:, 1].min()) / query.height),
        min(1.0, float(mapped[:, 0].max()) / query.width),
        min(1.0, float(mapped[:, 1].max()) / query.height),
    )


def _coverage(inlier_points: npt.NDArray[np.float32], box: Box, reference: Keypoints) -> float:
    """Share of the 4 x 4 cells of the located region (corpus side) holding an inlier."""
    x0, y0 = box[0] * reference.width, box[1] * reference.height
    x1, y1 = box[2] * reference.width, box[3] * reference.height
    if len(inlier_points) == 0 or x1 <= x0 or y1 <= y0:
        return 0.0
    cx = np.clip(((inlier_points[:, 0] - x0) / (x1 - x0) * 4).astype(int), 0, 3)
    cy = np.clip(((inlier_points[:, 1] - y0) / (y1 - y0) * 4).astype(int), 0, 3)
    return len(set(zip(cx.tolist(), cy.tolist(), strict=True))) / 16.0


def _central(inlier_points: npt.NDArray[np.float32], box: Box, reference: Keypoints) -> int:
    """Inliers in the middle 2 x 2 of the 4 x 4 cells of the located region (corpus side)."""
    x0, y0 = box[0] * reference.width, box[1] * reference.height
    x1, y1 = box[2] * reference.width, box[3] * reference.height
    if len(inlier_points) == 0 or x1 <= x0 or y1 <= y0:
        return 0
    u = (inlier_points[:, 0] - x0) / (x1 - x0)
    v = (inlier_points[:, 1] - y0) / (y1 - y0)
    return int(((u >= 0.25) & (u < 0.75) & (v >= 0.25) & (v < 0.75)).sum())


def checked(match: GeometricMatch, query: Keypoints, reference: Keypoints) -> GeometricMatch:
    """``match`` with its content check (``content_check``) done where it is due: a plausible
    fit of at least ``CHECK_FROM`` inliers, both images' pixels at hand (``query`` is the side
    the match was fitted from: the mirrored keypoints for a mirrored match)."""
    if (
        match.content is not None
        or match.inliers < CHECK_FROM
        or not match.plausible
        or query.pixels is None
        or reference.pixels is None
        or len(match.transform) != 6
    ):
        return match
    aligned_by = (
        np.asarray(match.perspective, np.float64).reshape(3, 3)
        if match.perspective
        else np.asarray(match.transform, np.float64).reshape(2, 3)
    )
    agreement = content_agreement(
        query.pixels,
        (query.width, query.height),
        reference.pixels,
        (reference.width, reference.height),
        aligned_by,
        match.inlier_points,
    )
    return match if agreement is None else replace(match, content=agreement)


def needs_check(match: GeometricMatch) -> bool:
    """Whether ``match`` is due a content check it has not had (its corpus pixels were missing)."""
    return match.content is None and match.inliers >= CHECK_FROM and match.plausible


def match_keypoints(query: Keypoints, reference: Keypoints) -> GeometricMatch:
    """The best geometric match of a test image (plain or mirrored) into a corpus image."""
    mirrored = query.mirrored
    return _plain_or_mirrored(
        _fit(query, reference, mirrored=False),
        None if mirrored is None else lambda: _fit(mirrored, reference, mirrored=True),
    )


def _plain_or_mirrored(
    plain: GeometricMatch, mirrored: Callable[[], GeometricMatch] | None
) -> GeometricMatch:
    """The plain match, unless it is no copy and the mirrored one (fitted only then) has more
    inliers."""
    if mirrored is None or plain.is_copy():
        return plain
    flipped = mirrored()
    return flipped if flipped.inliers > plain.inliers else plain


MATCH_BATCH = 8  # references whose descriptor distances are computed in one product


def match_many(query: Keypoints, references: Sequence[Keypoints]) -> list[GeometricMatch]:
    """``match_keypoints`` of one test image against several corpus images (order kept).

    The same matches, faster: the descriptor distances to ``MATCH_BATCH`` references at a
    time (plain and mirrored query) come from one matrix product instead of one brute-force
    match per pair and side.
    """
    out: list[GeometricMatch | None] = [None] * len(references)
    sides = [query] + ([query.mirrored] if query.mirrored is not None else [])
    side_norms = [side.exact_norms for side in sides]
    batchable = [
        i for i, ref in enumerate(references) if len(ref) >= 2 and ref.exact_norms is not None
    ]
    if any(n is None for n in side_norms) or any(len(side) < 2 for side in sides):
        batchable = []
    stacked = np.concatenate([side.scaled_descriptors for side in sides]) if batchable else None
    for start in range(0, len(batchable), MATCH_BATCH):
        chunk = batchable[start : start + MATCH_BATCH]
        refs = [references[i] for i in chunk]
        assert stacked is not None
        reference_norms = [ref.exact_norms for ref in refs]
        partial = _partial_distances(
            stacked,
            np.concatenate([ref.descriptors for ref in refs]),
            np.concatenate([n for n in reference_norms if n is not None]),
        )
        offset = 0
        for i, ref in zip(chunk, refs, strict=True):
            block = partial[:, offset : offset + len(ref)]
            offset += len(ref)
            out[i] = _match_from_distances(block, sides, ref)
    return [
        match if match is not None else match_keypoints(query, ref)
        for match, ref in zip(out, references, strict=True)
    ]


def _match_from_distances(
    partial: npt.NDArray[np.float32], sides: Sequence[Keypoints], reference: Keypoints
) -> GeometricMatch:
    """``match_keypoints`` from the partial distances of the stacked query sides (plain,
    mirrored)."""
    rows = len(sides[0])

    def fit(side: int) -> GeometricMatch:
        block = partial[:rows] if side == 0 else partial[rows:]
        norms = sides[side].exact_norms
        assert norms is not None  # match_many batches exact descriptors only
        query_index, reference_index = _ratio_from_distances(block.copy(), norms)
        q, r = _points(sides[side], reference, query_index, reference_index)
        fitted = _fit_matches(q, r, sides[side], reference, side == 1, query_index)
        return checked(fitted, sides[side], reference)

    return _plain_or_mirrored(fit(0), (lambda: fit(1)) if len(sides) > 1 else None)


def geometric_match(query: Image.Image, reference: Image.Image) -> GeometricMatch:
    """Geometric match of one pair of decoded images (``query`` = the test image)."""
    return match_keypoints(keypoints(query, with_mirror=True), keypoints(reference))
