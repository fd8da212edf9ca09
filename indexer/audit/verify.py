"""Shift / scale / colour-tolerant near-duplicate verification of candidate pairs.

64-bit pHash and CNN features both miss many near-duplicates among small images (32-64 px,
CIFAR / Tiny-ImageNet sized): a 2-pixel shift of a 32 px image is a 6% translation, enough
to flip a third of the pHash bits, and ImageNet features of a blurry thumbnail are close
for many unrelated thumbnails. The audit therefore *verifies* candidate pairs (loose pHash
radius or top-k cosine) by aligning them directly:

1. each image becomes a 32x32 grayscale thumbnail (``verify_thumbnail``; 1 KiB as uint8,
   cheap to store next to a corpus item);
2. the reference (candidate) is band-passed -- a difference of Gaussians that drops the
   smooth sky-above-ground layout every photo shares and the pixel noise JPEG adds -- and
   its central 24x24 window is z-normalised;
3. the query is resampled at a few scales (0.9-1.1), mirrored and not, band-passed, and
   every 24x24 window within +-3 px of the centre is z-normalised;
4. the score is the highest normalised cross-correlation (Pearson r) between the
   reference window and any query window: one matrix product per query for all its
   candidates.

Scores lie in [-1, 1]: ~1 for the same picture, whatever its brightness, contrast, colour
balance or JPEG quality (the correlation is invariant to gain and offset); unrelated
pictures score low because the band-passed windows must line up texture for texture.
``indexer.audit.thresholds`` holds the calibrated cut-off (see ``docs/thresholds.md``).
The score is not symmetric in theory (only the query is shifted and scaled), but the
tried shifts and scales are symmetric, so swapping the pair changes it by little.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

THUMB_SIZE = 32
WINDOW = 24
MAX_SHIFT = 3
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


def _reference_vectors(thumbs: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """(n, 32, 32) thumbnails -> (n, WINDOW**2) normalised central band-passed windows."""
    lo = (THUMB_SIZE - WINDOW) // 2
    pixels = thumbs.astype(np.float32)
    fine = _blur_matrix(THUMB_SIZE, _SIGMA_FINE)[lo : lo + WINDOW]
    coarse = _blur_matrix(THUMB_SIZE, _SIGMA_COARSE or 1.0)[lo : lo + WINDOW]
    band = _separable(pixels, fine)
    if _SIGMA_COARSE:
        band = band - _separable(pixels, coarse)
    return _normalise_rows(band.reshape(len(thumbs), WINDOW * WINDOW))


def _query_source(image: ImageOrThumbnail) -> Image.Image:
    """A grayscale PIL image to resample query variants from (the original if given)."""
    if isinstance(image, np.ndarray):
        return Image.fromarray(verify_thumbnail(image), "L")
    gray = image if image.mode == "L" else image.convert("L")
    if min(gray.size) > 4 * THUMB_SIZE:
        gray = gray.reduce(max(1, min(gray.size) // (2 * THUMB_SIZE)))
    return gray


def query_variants(image: ImageOrThumbnail) -> npt.NDArray[np.float32]:
    """Every shifted / scaled / mirrored normalised window of a query: (n_variants, WINDOW**2)."""
    gray = _query_source(image)
    blocks: list[npt.NDArray[np.float32]] = []
    for source in (gray, gray.transpose(Image.Transpose.FLIP_LEFT_RIGHT)):
        for scale in SCALES:
            n = round(THUMB_SIZE * scale)
            band = _band_pass(np.asarray(source.resize((n, n), _RESAMPLE), dtype=np.float32))
            lo = (n - WINDOW) // 2 - MAX_SHIFT
            hi = lo + WINDOW + 2 * MAX_SHIFT  # exclusive end of the searched area
            pad_lo, pad_hi = max(0, -lo), max(0, hi - n)
            if pad_lo or pad_hi:
                band = np.pad(band, (pad_lo, pad_hi), mode="reflect")
            area = band[lo + pad_lo : hi + pad_lo, lo + pad_lo : hi + pad_lo]
            windows = sliding_window_view(area, (WINDOW, WINDOW))
            blocks.append(windows.reshape(-1, WINDOW * WINDOW))
    return _normalise_rows(np.concatenate(blocks, axis=0))


def verify_scores(
    query: ImageOrThumbnail, candidates: Sequence[ImageOrThumbnail] | npt.NDArray[np.uint8]
) -> npt.NDArray[np.float32]:
    """Verification score in [-1, 1] of ``query`` against each candidate (order kept).

    Candidates may be PIL images or 32x32 uint8 thumbnails from ``verify_thumbnail`` (a
    stacked ``(n, 32, 32)`` array works too). Higher means more surely the same picture.
    """
    if len(candidates) == 0:
        return np.zeros(0, np.float32)
    if isinstance(candidates, np.ndarray) and candidates.ndim == 3:
        thumbs = candidates.astype(np.uint8, copy=False)
    else:
        thumbs = np.stack([verify_thumbnail(c) for c in candidates])
    variants = query_variants(query)
    references = _reference_vectors(thumbs)
    scores = (variants @ references.T).max(axis=0)
    out: npt.NDArray[np.float32] = np.clip(scores, -1.0, 1.0).astype(np.float32)
    return out


def verify_score(a: ImageOrThumbnail, b: ImageOrThumbnail) -> float:
    """Verification score in [-1, 1] of one pair (``a`` is shifted / scaled, ``b`` is fixed)."""
    return float(verify_scores(a, [b])[0])
