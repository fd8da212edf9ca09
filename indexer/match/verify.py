"""Shift / scale / colour-tolerant near-duplicate verification of candidate pairs.

64-bit pHash and CNN features both miss many near-duplicates among small images (32-64 px,
CIFAR / Tiny-ImageNet sized): a 2-pixel shift of a 32 px image is a 6% translation, enough
to flip a third of the pHash bits, and ImageNet features of upscaled thumbnails are close
for many unrelated thumbnails. The audit therefore *verifies* candidate pairs (loose pHash
radius or cosine) by aligning the pixels directly:

1. each image becomes a 32x32 grayscale thumbnail (``verify_thumbnail``; 1 KiB as uint8,
   cheap to store next to a corpus item), a large image's plain frame or bars cut off first
   (``border_trim``);
2. the reference (candidate) is band-passed -- a difference of Gaussians that drops the
   smooth sky-above-ground layout every photo shares -- and its central 24x24 window is
   normalised (zero mean, unit norm; nearly flat windows are shrunk, not blown up);
3. the query is resampled at twelve scales -- 0.9-1.15 for slight zooms, 1.2-1.45 for a
   copy zoomed out by up to 0.75 or to look inside a border or padding -- plain and mirrored,
   band-passed, and every 24x24 window within +-5 px of the centre is taken (2,904 windows;
   a re-scraped thumbnail is shifted by up to 12% of its side, 4 px at 32 px);
4. ``r`` = the best normalised cross-correlation (Pearson r) between the reference window
   and any query window -- one matrix product per query for all its candidates;
5. ``a`` = the *ambiguity* of the pair: how well each image's centre window correlates
   with itself moved by 2 px (the larger of the two). A lone edge or a smooth gradient
   correlates with its own shifted copy, so a search over shifts and scales finds a good
   ``r`` against almost anything; textured content does not;
6. score = ``(r - a) / (1 - a)``, clipped to [-1, 1]: how much better the best alignment
   is than a 2-px misalignment of the image with itself;
7. a window whose detail sits in a few pixels (a star field: dots on black) has a *sparse
   support*: aligning any of its dots with any other image's dots gives a high ``r``. The
   score of a pair is scaled down by ``support / SPARSE_SUPPORT`` where either centre window's
   participation ratio (the share of pixels carrying its energy) is below ``SPARSE_SUPPORT``.

A query that is a zoom-in or crop of the reference (it shows 60-80% of its side: a
Tiny-ImageNet / CIFAR copy cut tighter, or a thumbnail zoomed in by up to 1.33) cannot be
searched by shrinking the query, which would leave less than a window. For those scales
(``ZOOM_IN``, 0.6-0.95) the reference is enlarged instead (32 px -> 34-53 px), band-passed, and the query's central window is slid over every
position of it (one batched FFT correlation per query for all candidates); ``r`` is the best
of both searches, and the same ambiguity normalisation applies. It costs most of the
verifier's time, so callers pass ``zoom_in`` to run it only where it is needed: the audit
runs it on small pairs and pairs without a cosine, where the geometric match
(``splitaudit.indexer.match.geometry``), which finds crops on large pairs, never runs.

Scores lie in [-1, 1]; 1 = the best alignment is perfect. Brightness, contrast, colour
balance and JPEG quality barely move it (the correlation ignores gain and offset).
Unrelated pictures almost all score below 0.3 even after the search (the highest of
600,000 benchmark pairs: 0.65, a bright disc on grey against another); a perfect copy of
an edge-only picture still scores 1. ``splitaudit.indexer.match.thresholds`` holds the calibrated
cut-off (see ``docs/thresholds.md``). Only the query is shifted and scaled, and the scales
lean towards > 1: pass the test image as the query, so a test copy with a border added is
found (the reverse direction tolerates borders up to ~5% a side). A plain border on two
opposite sides of a large image is cut off before either search (``border_trim``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

from splitaudit.indexer.match import border_trim

THUMB_SIZE = 32
WINDOW = 24
MAX_SHIFT = 5  # a thumbnail copy re-cut 12% off centre: 4 px at 32 px (issue 23)
AMBIGUITY_SHIFT = 2
# > 1.15: the query is zoomed out (down to 0.75) or has a border or padding
SCALES = (0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.45)
ZOOM_IN = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # the query shows this share of the side
# Participation ratio of a centre window's band-passed energy below which its support counts as
# sparse (a star field: 0.02-0.06); Gaussian noise has 1/3, photo thumbnails 0.05-0.45. Kept low:
# at 0.06 moon and retina tiles lost their copies in bench.accuracy (docs/thresholds.md).
SPARSE_SUPPORT = 0.035
# Band-pass standard deviation (grey levels) below which a window counts as flat.
MIN_CONTRAST = 2.0
# Difference-of-Gaussians band, sigmas in thumbnail pixels (32 px = the whole image).
_SIGMA_FINE = 0.6
_SIGMA_COARSE = 3.0
_RESAMPLE = Image.Resampling.BILINEAR
_EPS = 1e-6

ImageOrThumbnail = Image.Image | npt.NDArray[np.uint8]


def working_gray(image: Image.Image) -> Image.Image:
    """Grayscale, box-reduced to about 2x the thumbnail size first when much larger (fast),
    without a plain frame or bars it gained (``border_trim``; thumbnails keep theirs)."""
    gray = image if image.mode == "L" else image.convert("L")
    if min(gray.size) <= border_trim.MIN_SIDE:
        return gray
    if min(gray.size) > 4 * THUMB_SIZE:
        gray = gray.reduce(max(1, min(gray.size) // (2 * THUMB_SIZE)))
    box = border_trim.inner_box(np.asarray(gray))
    return gray if box is None else gray.crop(box)


def verify_thumbnail(image: ImageOrThumbnail) -> npt.NDArray[np.uint8]:
    """The 32x32 uint8 grayscale thumbnail verification works on (store it per corpus item);
    a large image's plain frame, letterbox or pillarbox bars are cut off first
    (``border_trim``)."""
    if isinstance(image, np.ndarray):
        if image.shape == (THUMB_SIZE, THUMB_SIZE) and image.dtype == np.uint8:
            return image
        image = Image.fromarray(np.asarray(image, dtype=np.uint8))
    small = working_gray(image).resize((THUMB_SIZE, THUMB_SIZE), _RESAMPLE)
    return np.asarray(small, dtype=np.uint8)


@lru_cache(maxsize=64)  # one per (size, sigma): 8 query scales, 3 zooms, 32 px; x 2 sigmas
def _blur_matrix(n: int, sigma: float) -> npt.NDArray[np.float32]:
    """(n, n) Gaussian smoothing matrix with edge-renormalised weights: ``M @ x @ M.T``."""
    idx = np.arange(n, dtype=np.float64)
    weights = np.exp(-0.5 * ((idx[:, None] - idx[None, :]) / sigma) ** 2)
    weights[weights < 1e-8] = 0.0  # float32 denormals would make every product 10-100x slower
    weights /= weights.sum(axis=1, keepdims=True)
    return weights.astype(np.float32)


def _separable(
    pixels: npt.NDArray[np.float32], rows: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """``rows @ P @ rows.T`` for every square image P in a (n, s, s) stack, as two BLAS calls."""
    n, s, _ = pixels.shape
    k = rows.shape[0]
    right = (pixels.reshape(n * s, s) @ rows.T).reshape(n, s, k)  # P @ rows.T
    left = (right.transpose(0, 2, 1).reshape(n * k, s) @ rows.T).reshape(n, k, k)
    out: npt.NDArray[np.float32] = left.transpose(0, 2, 1).astype(np.float32, copy=False)
    return out


def _band_pass(pixels: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Difference of Gaussians (fine minus coarse blur) of each image in a (n, s, s) stack."""
    s = pixels.shape[-1]
    fine = _separable(pixels, _blur_matrix(s, _SIGMA_FINE))
    out: npt.NDArray[np.float32] = fine - _separable(pixels, _blur_matrix(s, _SIGMA_COARSE))
    return out


def _normalise_rows(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Zero mean per row, divided by the row's norm -- or by the norm a window of
    ``MIN_CONTRAST`` standard deviation would have, if larger: a nearly flat window (sky,
    wall, over-exposed thumbnail) is shrunk toward zero instead of having its noise blown up
    to unit length, so two flat images never verify as the same picture."""
    rows = rows - rows.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    floor = MIN_CONTRAST * math.sqrt(rows.shape[1])  # a Python float: float32 rows stay float32
    out: npt.NDArray[np.float32] = rows / np.maximum(norms, max(floor, _EPS))
    return out


@lru_cache(maxsize=4)
def _ring(radius: int) -> tuple[tuple[int, int], ...]:
    """The (dx, dy) offsets at Chebyshev distance ``radius`` (the square ring around 0)."""
    return tuple(
        (dx, dy)
        for dy in range(-radius, radius + 1)
        for dx in range(-radius, radius + 1)
        if max(abs(dx), abs(dy)) == radius
    )


@dataclass(frozen=True)
class ZoomedReferences:
    """References enlarged by ``1 / ZOOM_IN``: band-passed spectra and every window's norm."""

    spectra: tuple[npt.NDArray[np.complex64], ...]  # per zoom: (n, size, size // 2 + 1)
    inverse_norms: tuple[npt.NDArray[np.float32], ...]  # per zoom: (n, v, v) valid windows

    def correlations(self, templates: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Best Pearson r of zero-mean unit-norm (t, WINDOW, WINDOW) templates over all
        positions and zooms, per reference (a template is slid, never padded past an edge)."""
        best = np.full(len(self.spectra[0]), -1.0, np.float32)
        for spectra, inverse in zip(self.spectra, self.inverse_norms, strict=True):
            size, valid = _fft_size(inverse.shape[-1] + WINDOW - 1), inverse.shape[-1]
            padded = np.zeros((len(templates), size, size), np.float32)
            padded[:, :WINDOW, :WINDOW] = templates
            kernels = np.conj(np.fft.rfft2(padded))  # (t, size, size // 2 + 1)
            # Circular correlation of an n-px image: positions up to n - WINDOW never wrap.
            corr = np.fft.irfft2(spectra[:, None] * kernels[None], s=(size, size))
            scores = corr[..., :valid, :valid] * inverse[:, None]
            best = np.maximum(best, scores.reshape(len(best), -1).max(axis=1))
        return best

    def take(self, rows: npt.NDArray[np.intp]) -> ZoomedReferences:
        """The zoomed references at ``rows`` (positions in this object), in that order."""
        return ZoomedReferences(
            tuple(s[rows] for s in self.spectra), tuple(v[rows] for v in self.inverse_norms)
        )


@lru_cache(maxsize=64)
def _fft_size(n: int) -> int:
    """The smallest FFT size >= n whose only prime factors are 2, 3, 5 and 7 (53 px -> 54)."""
    size = max(1, n)
    while True:
        rest = size
        for prime in (2, 3, 5, 7):
            while rest % prime == 0:
                rest //= prime
        if rest == 1:
            return size
        size += 1


def _window_norms(band: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Centred norm of every WINDOW-square window of each (n, s, s) image, from integral images."""
    n, s = band.shape[0], band.shape[-1]
    # both tables in one pass, each with its leading zero row and column (0 + x is x: the same
    # sums, in the same order, as summing first and padding after)
    tables = np.zeros((2, n, s + 1, s + 1))
    tables[0, :, 1:, 1:] = band
    tables[1, :, 1:, 1:] = tables[0, :, 1:, 1:] ** 2
    np.cumsum(tables, axis=2, out=tables)
    np.cumsum(tables, axis=3, out=tables)
    sums, squares = tables[0], tables[1]

    def box(table: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        w = WINDOW
        out: npt.NDArray[np.float64] = (
            table[:, w:, w:] - table[:, :-w, w:] - table[:, w:, :-w] + table[:, :-w, :-w]
        )
        return out

    total = box(sums)
    centred = np.sqrt(np.maximum(box(squares) - total * total / WINDOW**2, 0.0))
    return centred.astype(np.float32)


def zoomed_references(thumbs: npt.NDArray[np.uint8]) -> ZoomedReferences:
    """Enlarge, band-pass and transform each reference once per ``ZOOM_IN`` scale."""
    spectra, inverse_norms = [], []
    floor = max(MIN_CONTRAST * WINDOW, _EPS)
    images = [Image.fromarray(t, "L") for t in thumbs]  # once, for every zoom
    for zoom in ZOOM_IN:
        n = round(THUMB_SIZE / zoom)
        pixels = np.stack([np.asarray(i.resize((n, n), _RESAMPLE), np.float32) for i in images])
        band = _band_pass(pixels)
        spectra.append(np.fft.rfft2(band, s=(_fft_size(n),) * 2).astype(np.complex64))
        inverse_norms.append((1.0 / np.maximum(_window_norms(band), floor)).astype(np.float32))
    return ZoomedReferences(tuple(spectra), tuple(inverse_norms))


@dataclass(frozen=True)
class References:
    """Candidates prepared once, reusable for many queries: windows and ambiguities."""

    vectors: npt.NDArray[np.float32]  # (n, WINDOW**2) normalised central windows
    ambiguity: npt.NDArray[np.float32]  # (n,) centre window vs itself moved AMBIGUITY_SHIFT px
    zoomed: ZoomedReferences | None  # the zoom-in search's references, for zoom_rows only
    zoom_rows: npt.NDArray[np.intp]  # which references ``zoomed`` holds, in its order

    def __len__(self) -> int:
        return len(self.vectors)

    def take(self, rows: npt.ArrayLike) -> References:
        """The references at ``rows`` (positions in this object), in that order; the zoom-in
        search's references come along for the rows that have them."""
        picked = np.asarray(rows, dtype=np.intp).reshape(-1)
        position = np.full(len(self), -1, np.intp)
        position[self.zoom_rows] = np.arange(len(self.zoom_rows))
        at = position[picked]
        zoomed_here = np.flatnonzero(at >= 0).astype(np.intp)
        zoomed = (
            self.zoomed.take(at[zoomed_here])
            if self.zoomed is not None and len(zoomed_here)
            else None
        )
        return References(self.vectors[picked], self.ambiguity[picked], zoomed, zoomed_here)

    def zoomed_at(self, rows: npt.NDArray[np.intp]) -> ZoomedReferences:
        """The zoom-in search's references for ``rows`` (they must have been prepared)."""
        if self.zoomed is not None and np.array_equal(rows, self.zoom_rows):
            return self.zoomed
        position = np.full(len(self), -1, np.intp)
        position[self.zoom_rows] = np.arange(len(self.zoom_rows))
        picked = position[rows]
        if self.zoomed is None or (picked < 0).any():
            raise ValueError(
                "the zoom-in search was asked for references prepared without it: pass the "
                "same zoom_in to prepare_references as to verify_scores"
            )
        return self.zoomed.take(picked)


def zoom_rows(zoom_in: bool | npt.ArrayLike, n: int) -> npt.NDArray[np.intp]:
    """Indices of the candidates the zoom-in search covers (a bool or an (n,) bool mask)."""
    wanted = np.broadcast_to(np.asarray(zoom_in, dtype=bool), (n,))
    return np.flatnonzero(wanted).astype(np.intp)


def prepare_references(
    candidates: Sequence[ImageOrThumbnail] | npt.NDArray[np.uint8] | References,
    zoom_in: bool | npt.ArrayLike = True,
) -> References:
    """Prepare candidates: PIL images, 32x32 uint8 thumbnails, or an (n, 32, 32) uint8 stack.

    ``zoom_in`` (one bool, or one per candidate) says which candidates the zoom-in search
    may run on; preparing it costs three resizes and FFTs per candidate, so leave out the
    pairs that do not need it (``splitaudit.indexer.match.geometric_tier.zoom_in_mask``).
    """
    if isinstance(candidates, References):
        return candidates
    if isinstance(candidates, np.ndarray) and candidates.ndim == 3:
        thumbs = candidates.astype(np.uint8, copy=False)
    else:
        thumbs = np.stack([verify_thumbnail(c) for c in candidates])
    band = _band_pass(thumbs.astype(np.float32))
    lo = (THUMB_SIZE - WINDOW) // 2

    def window(dx: int, dy: int) -> npt.NDArray[np.float32]:
        cut = band[:, lo + dy : lo + dy + WINDOW, lo + dx : lo + dx + WINDOW]
        return _normalise_rows(cut.reshape(len(thumbs), WINDOW * WINDOW))

    vectors = window(0, 0)
    shifted = [np.einsum("ij,ij->i", vectors, window(dx, dy)) for dx, dy in _ring(AMBIGUITY_SHIFT)]
    ambiguity = np.max(shifted, axis=0).astype(np.float32)
    rows = zoom_rows(zoom_in, len(thumbs))
    zoomed = zoomed_references(thumbs[rows]) if len(rows) else None
    return References(vectors, ambiguity, zoomed, rows)


@dataclass(frozen=True)
class QueryVariants:
    """A query's shifted / scaled / mirrored windows and its own ambiguity.

    ``windows`` are raw band-passed windows; ``inverse_norms`` turn their dot products with
    (zero-mean) reference vectors into correlations, so the 784 windows are never copied
    into normalised form (the references are zero-mean, so the query's mean drops out).
    """

    windows: npt.NDArray[np.float32]  # (n_variants, WINDOW**2)
    inverse_norms: npt.NDArray[np.float32]  # (n_variants,)
    ambiguity: float
    template: npt.NDArray[np.float32]  # (WINDOW, WINDOW) normalised scale-1 centre window

    def correlations(
        self, references: References, zoom_rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.float32]:
        """Best correlation over all variants, per reference: shape (n_references,); the
        zoom-in search runs on the references at ``zoom_rows`` only."""
        raw = self.windows @ references.vectors.T
        best: npt.NDArray[np.float32] = (raw * self.inverse_norms[:, None]).max(axis=0)
        if len(zoom_rows):
            templates = np.stack([self.template, self.template[:, ::-1]])
            zoomed = references.zoomed_at(zoom_rows).correlations(templates)
            best[zoom_rows] = np.maximum(best[zoom_rows], zoomed)
        return best


def _search_area(band: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The (WINDOW + 2 * MAX_SHIFT)-square around the centre of a band-passed image."""
    n = band.shape[0]
    lo = (n - WINDOW) // 2 - MAX_SHIFT
    hi = lo + WINDOW + 2 * MAX_SHIFT
    pad_lo, pad_hi = max(0, -lo), max(0, hi - n)
    if pad_lo or pad_hi:  # scales < 1: the search reaches past the edge by a pixel or two
        band = np.pad(band, (pad_lo, pad_hi), mode="reflect")
    return band[lo + pad_lo : hi + pad_lo, lo + pad_lo : hi + pad_lo]


def query_variants(image: ImageOrThumbnail) -> QueryVariants:
    """Every window of the query within +-MAX_SHIFT px of the centre, at each scale, plain and mirrored."""
    gray = (
        Image.fromarray(verify_thumbnail(image), "L")
        if isinstance(image, np.ndarray)
        else working_gray(image)
    )
    side = 2 * MAX_SHIFT + 1
    # every window written once, straight into its rows (a reshape of the sliding view would
    # copy it, and a concatenation of the blocks copy it again: ~7 MB a query)
    laid_out = np.empty((len(SCALES), 2, side, side, WINDOW, WINDOW), np.float32)
    for s, scale in enumerate(SCALES):
        n = round(THUMB_SIZE * scale)
        pixels = np.asarray(gray.resize((n, n), _RESAMPLE), dtype=np.float32)
        area = _search_area(_band_pass(pixels[None])[0])
        # The band-pass commutes with a horizontal flip, so the mirrored query is a slice.
        for m, view in enumerate((area, area[:, ::-1])):
            laid_out[s, m] = sliding_window_view(view, (WINDOW, WINDOW))
    windows = laid_out.reshape(-1, WINDOW * WINDOW)
    sums = windows.sum(axis=1)
    squares = np.einsum("ij,ij->i", windows, windows)
    centred = np.sqrt(np.maximum(squares - sums * sums / windows.shape[1], 0.0))
    floor = max(MIN_CONTRAST * np.sqrt(windows.shape[1]), _EPS)
    inverse = (1.0 / np.maximum(centred, floor)).astype(np.float32)
    # Ambiguity as for references: the scale-1 centre window against its 2-px shifts.
    first = SCALES.index(1.0) * 2 * side * side
    centre = _normalise_rows(windows[first + MAX_SHIFT * side + MAX_SHIFT][None])[0]
    ring = [first + (MAX_SHIFT + dy) * side + MAX_SHIFT + dx for dx, dy in _ring(AMBIGUITY_SHIFT)]
    ambiguity = float(np.max(_normalise_rows(windows[ring]) @ centre))
    return QueryVariants(windows, inverse, ambiguity, centre.reshape(WINDOW, WINDOW))


def _support(windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Participation ratio of each zero-mean (n, WINDOW**2) window: ``(sum x^2)^2 / (N sum x^4)``,
    the share of its pixels that carry its energy (1/3 for noise, ~1/N for one bright dot)."""
    squares = windows.astype(np.float64) ** 2
    energy = squares.sum(axis=1)
    quartic = np.maximum((squares**2).sum(axis=1) * windows.shape[1], _EPS)
    out: npt.NDArray[np.float32] = (energy**2 / quartic).astype(np.float32)
    return out


def sparse_weight(
    images: Sequence[ImageOrThumbnail] | npt.NDArray[np.uint8],
) -> npt.NDArray[np.float32]:
    """The factor the verifier puts on a score of each image: ``min(1, support /
    SPARSE_SUPPORT)`` of its thumbnail's band-passed centre window (1 for a photo, ~0.3 for one
    dot on a plain ground): the pair's factor is the smaller of its two images'. Used on the
    scores of other pixel tests of small pairs (``small_pairs.align_small_pairs``), so a dot
    on blue does not align with a star field where the verifier would not call it close."""
    thumbs = np.stack([verify_thumbnail(image) for image in images]).astype(np.float32)
    if not len(thumbs):
        return np.zeros(0, np.float32)
    band = _band_pass(thumbs)
    lo = (THUMB_SIZE - WINDOW) // 2
    windows = band[:, lo : lo + WINDOW, lo : lo + WINDOW].reshape(len(thumbs), -1)
    windows = windows - windows.mean(axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = np.minimum(1.0, _support(windows) / SPARSE_SUPPORT).astype(
        np.float32
    )
    return out


def verifiable(image: ImageOrThumbnail) -> bool:
    """Whether an image's thumbnail has the structure verification needs to tell a copy from
    another picture: neither flat (band-passed centre below ``MIN_CONTRAST`` grey levels: sky, a
    plain wall) nor sparse (support below ``SPARSE_SUPPORT``: a few dots on black)."""
    band = _band_pass(verify_thumbnail(image).astype(np.float32)[None])[0]
    lo = (THUMB_SIZE - WINDOW) // 2
    window = band[lo : lo + WINDOW, lo : lo + WINDOW].reshape(1, -1)
    window = window - window.mean()
    return bool(window.std() >= MIN_CONTRAST and _support(window)[0] >= SPARSE_SUPPORT)


def verify_scores(
    query: ImageOrThumbnail,
    candidates: Sequence[ImageOrThumbnail] | npt.NDArray[np.uint8] | References,
    zoom_in: bool | npt.ArrayLike = True,
) -> npt.NDArray[np.float32]:
    """Verification score in [-1, 1] of ``query`` against each candidate (order kept).

    Candidates may be PIL images, 32x32 uint8 thumbnails from ``verify_thumbnail``, a
    stacked ``(n, 32, 32)`` array, or ``prepare_references(...)`` reused across queries
    (prepared with a ``zoom_in`` covering this call's). ``zoom_in`` (one bool, or one per
    candidate) selects the pairs the zoom-in search runs on: it costs most of the time, and
    on large pairs the geometric match finds crops better (``zoom_in_mask`` in
    ``splitaudit.indexer.match.geometric_tier``).
    """
    if len(candidates) == 0:
        return np.zeros(0, np.float32)
    rows = zoom_rows(zoom_in, len(candidates))
    references = prepare_references(candidates, zoom_in)
    variants = query_variants(query)
    best = variants.correlations(references, rows)
    ambiguity = np.maximum(references.ambiguity, variants.ambiguity)
    scores = (best - ambiguity) / np.maximum(1.0 - ambiguity, _EPS)
    support = np.minimum(_support(references.vectors), _support(variants.template.reshape(1, -1)))
    scores = scores * np.minimum(1.0, support / SPARSE_SUPPORT)
    out: npt.NDArray[np.float32] = np.clip(scores, -1.0, 1.0).astype(np.float32)
    return out


def verify_score(a: ImageOrThumbnail, b: ImageOrThumbnail) -> float:
    """Verification score in [-1, 1] of one pair (``a`` is shifted / scaled, ``b`` is fixed)."""
    return float(verify_scores(a, [b])[0])
