"""Shape descriptors of thumbnails: where a re-scraped small copy's source may be found.

A thumbnail copied from another (shifted by a few pixels, zoomed 0.75-1.33, recoloured,
re-encoded) keeps the layout of its edges while its pixels, its pHash (12-22 bits away) and
its embedding (ranked behind dozens of look-alike thumbnails of the same kind of scene) drift.
The descriptor is a histogram of oriented gradients of the 32x32 verification thumbnail
(``verify.verify_thumbnail``, the image the small pairs are verified on): a Gaussian blur
(sigma ``SIGMA`` px), central differences, ``CELLS`` x ``CELLS`` cells of ``BINS`` unsigned
orientations, each pixel's magnitude split between its two nearest orientation bins; square
roots of the counts (a Hellinger map, so one strong edge does not drown the rest), then a unit
vector. Brightness and contrast changes scale every gradient alike and vanish in the
normalisation; hue moves the grey levels little; a shift or zoom of a few pixels moves an edge
within its 8-pixel cell more often than out of it.

Measured on ``bench.recall --distractors 12000``'s corpora (12,108-12,113 images, ~12,000 of
them look-alike thumbnails of the same photos' kinds of scenes; the rank of each copy's source
among them by cosine, seeds 0, 1, 2): the ``combo`` family (shift, zoom, colour, JPEG at once)
has its source among the 10 nearest for 0.80-0.87 of the copies, ``shift`` 0.92-0.97, ``zoom``
0.96-0.99; a normalised 8x8 grey thumbnail, before this was built: 0.42-0.50 / 0.55-0.64 /
0.77-0.86, a blurred 16x16 one about the same. Where the embedding and pHash searches miss a
copy's source, this ranks it first for most (docs/recall.md).

Corpus images with a short side under ``MAX_SIDE`` px keep theirs (``Item.shape``, float16:
256 bytes, ``db.shape_blob``); a small test image asks for the ``SHAPE_TOP_K`` nearest
(``match.pair_search.shape_pairs``), which are verification candidates like the hash k-NN's.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.db.shape_blob import SHAPE_DIM

CELLS = 4
BINS = 8
SIGMA = 1.0
SIDE = 32  # the verification thumbnail's side
MAX_SIDE = 128  # corpus images with a shorter short side keep a descriptor
assert CELLS * CELLS * BINS == SHAPE_DIM  # the stored width (``db.shape_blob``)
# mean gradient magnitude (grey levels a pixel) under which a thumbnail is flat: no descriptor
# (a row of zeros; without this the rounding noise of a flat picture's blur was normalised into
# a unit vector like any other)
FLAT = 0.05


@lru_cache(maxsize=1)
def _blur() -> npt.NDArray[np.float32]:
    """(SIDE, SIDE) Gaussian smoothing, weights renormalised at the edges: ``B @ x @ B.T``."""
    idx = np.arange(SIDE, dtype=np.float64)
    weights = np.exp(-0.5 * ((idx[:, None] - idx[None, :]) / SIGMA) ** 2)
    weights[weights < 1e-6] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    return weights.astype(np.float32)


@lru_cache(maxsize=1)
def _cell_of() -> npt.NDArray[np.int64]:
    """(SIDE, SIDE): each pixel's cell, row-major."""
    cell = np.arange(SIDE) * CELLS // SIDE
    return (cell[:, None] * CELLS + cell[None, :]).astype(np.int64)


def shape_descriptors(thumbs: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Descriptors of ``(n, 32, 32)`` grey thumbnails, as ``(n, SHAPE_DIM)`` unit rows (a row
    of zeros for a flat thumbnail: mean gradient under ``FLAT``)."""
    x = np.asarray(thumbs, dtype=np.float32)
    if x.ndim != 3 or x.shape[1:] != (SIDE, SIDE):
        raise ValueError(f"expected (n, {SIDE}, {SIDE}) thumbnails, got shape {x.shape}")
    n = len(x)
    if n == 0:
        return np.zeros((0, SHAPE_DIM), np.float32)
    blur = _blur()
    b = blur @ x @ blur.T
    gx = np.empty_like(b)
    gy = np.empty_like(b)
    gx[:, :, 1:-1] = b[:, :, 2:] - b[:, :, :-2]
    gx[:, :, 0] = b[:, :, 1] - b[:, :, 0]
    gx[:, :, -1] = b[:, :, -1] - b[:, :, -2]
    gy[:, 1:-1] = b[:, 2:] - b[:, :-2]
    gy[:, 0] = b[:, 1] - b[:, 0]
    gy[:, -1] = b[:, -1] - b[:, -2]
    magnitude = np.hypot(gx, gy)
    position = (np.arctan2(gy, gx) % np.pi) * (BINS / np.pi)  # unsigned: [0, BINS)
    low = np.floor(position)
    upper = position - low
    low_bin = low.astype(np.int64) % BINS
    base = (np.arange(n, dtype=np.int64)[:, None, None] * (CELLS * CELLS) + _cell_of()) * BINS
    counts = np.bincount(
        np.concatenate([(base + low_bin).ravel(), (base + (low_bin + 1) % BINS).ravel()]),
        weights=np.concatenate([(magnitude * (1 - upper)).ravel(), (magnitude * upper).ravel()]),
        minlength=n * SHAPE_DIM,
    )
    counts = counts.reshape(n, SHAPE_DIM)
    rows = np.sqrt(counts).astype(np.float32)
    rows[counts.sum(axis=1) < FLAT * SIDE * SIDE] = 0.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)  # type: ignore[no-any-return]


def keeps_shape(width: int, height: int) -> bool:
    """Whether a corpus image of this size keeps a descriptor."""
    return min(width, height) < MAX_SIDE
