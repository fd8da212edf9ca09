"""Shift / scale / colour-tolerant near-duplicate verification of candidate pairs.

64-bit pHash and CNN features both miss many near-duplicates among small images (32-64 px,
CIFAR / Tiny-ImageNet sized): a 2-pixel shift of a 32 px image is a 6% translation, enough
to flip a third of the pHash bits, and ImageNet features of upscaled thumbnails are close
for many unrelated thumbnails. The audit therefore *verifies* candidate pairs (loose pHash
radius or cosine) by aligning the pixels directly:

1. each image becomes a 32x32 grayscale thumbnail (``verify_thumbnail``; 1 KiB as uint8,
   cheap to store next to a corpus item);
2. the reference (candidate) is band-passed -- a difference of Gaussians that drops the
   smooth sky-above-ground layout every photo shares -- and its central 24x24 window is
   normalised (zero mean, unit norm; nearly flat windows are shrunk, not blown up);
3. the query is resampled at five scales (0.9-1.1), plain and mirrored, band-passed, and
   every 24x24 window within +-3 px of the centre is normalised (490 windows);
4. ``r`` = the best normalised cross-correlation (Pearson r) between the reference window
   and any query window -- one matrix product per query for all its candidates;
5. ``a`` = the *ambiguity* of the pair: how well each image's centre window correlates
   with itself moved by 2 px (the larger of the two). A lone edge or a smooth gradient
   correlates with its own shifted copy, so a search over shifts and scales finds a good
   ``r`` against almost anything; textured content does not;
6. score = ``(r - a) / (1 - a)``, clipped to [-1, 1]: how much better the best alignment
   is than a 2-px misalignment of the image with itself.

Scores lie in [-1, 1]; 1 = the best alignment is perfect. Brightness, contrast, colour
balance and JPEG quality barely move it (the correlation ignores gain and offset). Two
unrelated pictures score below ~0.3 even after the search; a perfect copy of an
edge-only picture still scores 1. ``indexer.audit.thresholds`` holds the calibrated
cut-off (see ``docs/thresholds.md``). Only the query is shifted and scaled, but the tried
shifts and scales are symmetric, so swapping a pair changes its score little.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

THUMB_SIZE = 32
WINDOW = 24
MAX_SHIFT = 3
AMBIGUITY_SHIFT = 2
SCALES = (0.9, 0.95, 1.0, 1.05, 1.1)
# Difference-of-Gaussians band: sigma in thumbnail pixels (32 px = whole image).
_SIGMA_FINE = 0.6
_SIGMA_COARSE = 3.0
_RESAMPLE = Image.Resampling.BILINEAR
_EPS = 1e-6
# Band-pass standard deviation (grey levels) below which a window counts as flat.
MIN_CONTRAST = 2.0

ImageOrThumbnail = Image.Image | npt.NDArray[np.uint8]


def verify_thumbnail(image: ImageOrThumbnail) -> npt.NDArray[np.uint8]:
    """The 32x32 uint8 grayscale thumbnail verification works on (store it per corpus item)."""
    if isinstance(image, np.ndarray):
        if image.shape == (THUMB_SIZE, THUMB_SIZE) and image.dtype == np.uint8:
            return image
        image = Image.fromarray(np.asarray(image, dtype=np.uint8))
    gray = image if image.mode == "L" else image.convert("L")
    # BOX reduces by area first (fast, alias-free on large inputs), then a bilinear finish.
    if min(gray.size) > 4 * THUMB_SIZE:
        gray = gray.reduce(max(1, min(gray.size) // (2 * THUMB_SIZE)))
    small = gray.resize((THUMB_SIZE, THUMB_SIZE), _RESAMPLE)
    return np.asarray(small, dtype=np.uint8)


@lru_cache(maxsize=16)
def _blur_matrix(n: int, sigma: float) -> npt.NDArray[np.float32]:
    """(n, n) Gaussian smoothing matrix with edge-renormalised weights: ``M @ x @ M.T``."""
    idx = np.arange(n, dtype=np.float64)
    weights = np.exp(-0.5 * ((idx[:, None] - idx[None, :]) / sigma) ** 2)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights.astype(np.float32)


def _band_pass(pixels: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Difference of Gaussians of a square image (fine minus coarse blur)."""
    n = pixels.shape[0]
    fine = _blur_matrix(n, _SIGMA_FINE)
    out: npt.NDArray[np.float32] = fine @ pixels @ fine.T
    if _SIGMA_COARSE:
        coarse = _blur_matrix(n, _SIGMA_COARSE)
        out = out - coarse @ pixels @ coarse.T
    return out


def _normalise_rows(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Zero mean per row, divided by the row's norm -- or by the norm a window of
    ``MIN_CONTRAST`` standard deviation would have, if larger: a nearly flat window (sky,
    wall, over-exposed thumbnail) is shrunk toward zero instead of having its noise blown up
    to unit length, so two flat images never verify as the same picture."""
    rows = rows - rows.mean(axis=1, keepdims=True)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    floor = MIN_CONTRAST * np.sqrt(rows.shape[1])
    out: npt.NDArray[np.float32] = rows / np.maximum(norms, max(floor, _EPS))
    return out


def _separable(pixels: npt.NDArray[np.float32], rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``rows @ P @ rows.T`` for every square image P in a (n, s, s) stack, as two BLAS calls."""
    n, s, _ = pixels.shape
    k = rows.shape[0]
    right = (pixels.reshape(n * s, s) @ rows.T).reshape(n, s, k)  # P @ rows.T
    left = (right.transpose(0, 2, 1).reshape(n * k, s) @ rows.T).reshape(n, k, k)
    out: npt.NDArray[np.float32] = left.transpose(0, 2, 1)
    return out


@lru_cache(maxsize=4)
def _offsets(radius: int) -> tuple[tuple[int, int], ...]:
    """The (dx, dy) offsets on the square ring at Chebyshev distance ``radius``."""
    return tuple(
        (dx, dy)
        for dy in range(-radius, radius + 1)
        for dx in range(-radius, radius + 1)
        if max(abs(dx), abs(dy)) == radius
    )


def _band_stack(thumbs: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """(n, 32, 32) thumbnails -> their band-passed versions."""
    pixels = thumbs.astype(np.float32)
    band = _separable(pixels, _blur_matrix(THUMB_SIZE, _SIGMA_FINE))
    if _SIGMA_COARSE:
        band = band - _separable(pixels, _blur_matrix(THUMB_SIZE, _SIGMA_COARSE))
    return band


@dataclass(frozen=True)
class References:
    """Candidates prepared once for many queries: normalised central windows + ambiguity."""

    vectors: npt.NDArray[np.float32]  # (n, WINDOW**2)
    ambiguity: npt.NDArray[np.float32]  # (n,)

    def __len__(self) -> int:
        return len(self.vectors)


def prepare_references(
    candidates: Sequence[ImageOrThumbnail] | npt.NDArray[np.uint8] | References,
) -> References:
    """Prepare candidates (PIL images, 32x32 uint8 thumbnails or an (n, 32, 32) stack)."""
    if isinstance(candidates, References):
        return candidates
    if isinstance(candidates, np.ndarray) and candidates.ndim == 3:
        thumbs = candidates.astype(np.uint8, copy=False)
    else:
        thumbs = np.stack([verify_thumbnail(c) for c in candidates])
    band = _band_stack(thumbs)
    lo = (THUMB_SIZE - WINDOW) // 2

    def window(dx: int, dy: int) -> npt.NDArray[np.float32]:
        cut = band[:, lo + dy : lo + dy + WINDOW, lo + dx : lo + dx + WINDOW]
        return _normalise_rows(cut.reshape(len(thumbs), WINDOW * WINDOW))

    vectors = window(0, 0)
    ambiguity = np.max(
        [np.einsum("ij,ij->i", vectors, window(dx, dy)) for dx, dy in _offsets(AMBIGUITY_SHIFT)],
        axis=0,
    ).astype(np.float32)
    return References(vectors, ambiguity)


@dataclass(frozen=True)
class QueryVariants:
    """A query's shifted / scaled / mirrored normalised windows and its own ambiguity."""

    vectors: npt.NDArray[np.float32]  # (n_variants, WINDOW**2)
    ambiguity: float


def _query_source(image: ImageOrThumbnail) -> Image.Image:
    """A grayscale PIL image to resample query variants from (the original if given)."""
    if isinstance(image, np.ndarray):
        return Image.fromarray(verify_thumbnail(image), "L")
    gray = image if image.mode == "L" else image.convert("L")
    if min(gray.size) > 4 * THUMB_SIZE:
        gray = gray.reduce(max(1, min(gray.size) // (2 * THUMB_SIZE)))
    return gray


def query_variants(image: ImageOrThumbnail) -> QueryVariants:
    """Every window of the query within +-MAX_SHIFT px at each scale, plain and mirrored."""
    gray = _query_source(image)
    side = 2 * MAX_SHIFT + 1
    blocks: list[npt.NDArray[np.float32]] = []
    ambiguity = 0.0
    for mirrored, source in enumerate((gray, gray.transpose(Image.Transpose.FLIP_LEFT_RIGHT))):
        for scale in SCALES:
            n = round(THUMB_SIZE * scale)
            band = _band_pass(np.asarray(source.resize((n, n), _RESAMPLE), dtype=np.float32))
            lo = (n - WINDOW) // 2 - MAX_SHIFT
            hi = lo + WINDOW + 2 * MAX_SHIFT  # exclusive end of the searched area
            pad_lo, pad_hi = max(0, -lo), max(0, hi - n)
            if pad_lo or pad_hi:
                band = np.pad(band, (pad_lo, pad_hi), mode="reflect")
            area = band[lo + pad_lo : hi + pad_lo, lo + pad_lo : hi + pad_lo]
            windows = _normalise_rows(sliding_window_view(area, (WINDOW, WINDOW)).reshape(-1, WINDOW * WINDOW))
            blocks.append(windows)
            if scale == 1.0 and not mirrored:
                # Same definition as for references: the centre window against its 2-px shifts.
                centre = windows[MAX_SHIFT * side + MAX_SHIFT]
                ring = [windows[(MAX_SHIFT + dy) * side + MAX_SHIFT + dx] for dx, dy in _offsets(AMBIGUITY_SHIFT)]
                ambiguity = float(np.max(np.stack(ring) @ centre))
    return QueryVariants(np.concatenate(blocks, axis=0), ambiguity)


def verify_scores(
    query: ImageOrThumbnail,
    candidates: Sequence[ImageOrThumbnail] | npt.NDArray[np.uint8] | References,
) -> npt.NDArray[np.float32]:
    """Verification score in [-1, 1] of ``query`` against each candidate (order kept).

    Candidates may be PIL images, 32x32 uint8 thumbnails from ``verify_thumbnail``, a
    stacked ``(n, 32, 32)`` array, or ``prepare_references(...)`` reused across queries.
    1 means the best alignment is perfect; see the module docstring for the scale.
    """
    if len(candidates) == 0:
        return np.zeros(0, np.float32)
    references = prepare_references(candidates)
    variants = query_variants(query)
    best = (variants.vectors @ references.vectors.T).max(axis=0)
    ambiguity = np.maximum(references.ambiguity, variants.ambiguity)
    scores = (best - ambiguity) / np.maximum(1.0 - ambiguity, _EPS)
    out: npt.NDArray[np.float32] = np.clip(scores, -1.0, 1.0).astype(np.float32)
    return out


def verify_score(a: ImageOrThumbnail, b: ImageOrThumbnail) -> float:
    """Verification score in [-1, 1] of one pair (``a`` is shifted / scaled, ``b`` is fixed)."""
    return float(verify_scores(a, [b])[0])
