"""64-bit perceptual hashes (pHash, dHash, mirrored pHash), imagehash-style.

pHash: grayscale, shrink to 32x32, 2-D DCT-II, keep the 8x8 lowest frequencies, bit =
coefficient > median of those 64 (the DC term included), as imagehash's ``phash``. Only
those 64 coefficients are needed, so the DCT is two small matrix products with a cached
basis rather than a full 32x32 transform. Mirroring a signal only flips the sign of its
odd DCT frequencies, so the mirrored image's pHash comes from the same coefficients; so do
the pHashes of the other six orientations of the dihedral group (``oriented_phashes``): a
vertical flip flips the signs of the odd vertical frequencies, a transpose transposes the
8x8 block, and every quarter turn or flip is a product of those.

dHash: grayscale, shrink to 9x8, bit = pixel brighter than its left neighbour.

Shrinking uses Pillow's BOX filter (exact area average) where imagehash uses Lanczos: on a
decoded photo that is ~5x cheaper, it is mirror-symmetric (so ``phash_mirror`` equals the
pHash of the mirrored image, barring float ties) and for the 8x8 lowest frequencies it differs
from Lanczos in about one bit in 64. The filter is part of the hash definition: changing
it changes every stored hash. Bits are packed row-major, first bit most significant, as
imagehash prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.features.hashes import Hash64, bits_to_int

HASH_SIZE = 8
PHASH_IMG_SIZE = 32  # imagehash's default: highfreq_factor 4 x hash_size 8
SHRINK_FILTER = Image.Resampling.BOX  # part of the hash definition, see module docstring

Orientation = Literal[
    "identity", "mirror", "flip", "rot90", "rot180", "rot270", "transpose", "transverse"
]
# The dihedral group of the square: how a copy may be turned or flipped relative to its source.
# "rot90" is a quarter turn counter-clockwise (PIL's ROTATE_90); "mirror" is left-right.
ORIENTATIONS: tuple[Orientation, ...] = (
    "identity",
    "mirror",
    "flip",
    "rot90",
    "rot180",
    "rot270",
    "transpose",
    "transverse",
)
_TRANSPOSES: dict[Orientation, Image.Transpose] = {
    "mirror": Image.Transpose.FLIP_LEFT_RIGHT,
    "flip": Image.Transpose.FLIP_TOP_BOTTOM,
    "rot90": Image.Transpose.ROTATE_90,
    "rot180": Image.Transpose.ROTATE_180,
    "rot270": Image.Transpose.ROTATE_270,
    "transpose": Image.Transpose.TRANSPOSE,
    "transverse": Image.Transpose.TRANSVERSE,
}


@dataclass(frozen=True, slots=True)
class PerceptualHashes:
    """The perceptual hashes of one image, as unsigned 64-bit ints."""

    phash: int
    dhash: int
    phash_mirror: int


@lru_cache(maxsize=4)
def _dct_basis(n: int, k: int) -> npt.NDArray[np.float64]:
    """First ``k`` rows of the unnormalised DCT-II matrix of size ``n`` (scipy's norm=None)."""
    rows = np.arange(k, dtype=np.float64)[:, None]
    cols = np.arange(n, dtype=np.float64)[None, :]
    basis: npt.NDArray[np.float64] = 2.0 * np.cos(np.pi * rows * (2.0 * cols + 1.0) / (2.0 * n))
    return basis


@lru_cache(maxsize=4)
def _mirror_signs(k: int) -> npt.NDArray[np.float64]:
    """(-1)^column: DCT coefficients of a horizontally flipped signal."""
    signs: npt.NDArray[np.float64] = np.where(np.arange(k) % 2 == 0, 1.0, -1.0)[None, :]
    return signs


def inverse_orientation(name: Orientation) -> Orientation:
    """The orientation that undoes ``name`` (quarter turns swap; flips and transposes are their own)."""
    return {"rot90": "rot270", "rot270": "rot90"}.get(name, name)  # type: ignore[return-value]


def orient(image: Image.Image, name: Orientation) -> Image.Image:
    """``image`` turned / flipped by ``name`` (``identity``: the image itself)."""
    return image if name == "identity" else image.transpose(_TRANSPOSES[name])


def orient_array(pixels: npt.NDArray[np.generic], name: Orientation) -> npt.NDArray[np.generic]:
    """``orient`` for a (height, width) array, e.g. a verification thumbnail (same pixels)."""
    ops = {
        "identity": lambda a: a,
        "mirror": lambda a: a[:, ::-1],
        "flip": lambda a: a[::-1, :],
        "rot90": lambda a: np.rot90(a, 1),
        "rot180": lambda a: a[::-1, ::-1],
        "rot270": lambda a: np.rot90(a, -1),
        "transpose": lambda a: a.T,
        "transverse": lambda a: a.T[::-1, ::-1],
    }
    return np.ascontiguousarray(ops[name](pixels))


def _oriented_block(lowfreq: npt.NDArray[np.float64], name: Orientation) -> npt.NDArray[np.float64]:
    """The 8x8 low-frequency DCT block of the image turned / flipped by ``name``.

    Rows are vertical frequencies, columns horizontal ones: a left-right flip negates the odd
    columns, a top-bottom flip the odd rows, a transpose transposes the block.
    """
    cols = _mirror_signs(HASH_SIZE)
    rows = cols.T
    t = lowfreq.T
    blocks: dict[Orientation, npt.NDArray[np.float64]] = {
        "identity": lowfreq,
        "mirror": lowfreq * cols,
        "flip": lowfreq * rows,
        "rot180": lowfreq * rows * cols,
        "transpose": t,
        "rot90": t * rows,  # np.rot90(P) == P.T[::-1, :]
        "rot270": t * cols,  # np.rot90(P, -1) == P.T[:, ::-1]
        "transverse": t * rows * cols,
    }
    return blocks[name]


def oriented_phashes(image: Image.Image) -> tuple[int, ...]:
    """For each of ``ORIENTATIONS`` o, the pHash of ``image`` with o undone: entry o equals the
    pHash of the source when ``image`` is its source turned / flipped by o.

    Entries 0 and 1 are ``phash`` and ``phash_mirror``; all eight come from one DCT block.
    """
    lowfreq = phash_lowfreq(_grayscale(image))
    return tuple(
        _median_bits(_oriented_block(lowfreq, inverse_orientation(name))) for name in ORIENTATIONS
    )


def _grayscale(image: Image.Image) -> Image.Image:
    return image if image.mode == "L" else image.convert("L")


def phash_lowfreq(gray: Image.Image) -> npt.NDArray[np.float64]:
    """The 8x8 low-frequency DCT block of a grayscale image resized to 32x32."""
    small = gray.resize((PHASH_IMG_SIZE, PHASH_IMG_SIZE), SHRINK_FILTER)
    pixels = np.asarray(small, dtype=np.float64)
    basis = _dct_basis(PHASH_IMG_SIZE, HASH_SIZE)
    lowfreq: npt.NDArray[np.float64] = basis @ pixels @ basis.T
    return lowfreq


def _median_bits(coefficients: npt.NDArray[np.float64]) -> int:
    # np.median's generality costs ~10x a sort of 64 values; same value for an even count.
    ordered = np.sort(coefficients, axis=None)
    middle = ordered.size // 2
    median = (ordered[middle - 1] + ordered[middle]) / 2.0
    return bits_to_int(coefficients > median)


def phash(image: Image.Image) -> Hash64:
    """64-bit pHash (DCT low frequencies vs their median)."""
    return Hash64(_median_bits(phash_lowfreq(_grayscale(image))))


def dhash(image: Image.Image) -> Hash64:
    """64-bit horizontal difference hash."""
    return Hash64(_dhash_bits(_grayscale(image)))


def _dhash_bits(gray: Image.Image) -> int:
    small_img = gray.resize((HASH_SIZE + 1, HASH_SIZE), SHRINK_FILTER)
    small = np.asarray(small_img, dtype=np.int16)
    return bits_to_int(small[:, 1:] > small[:, :-1])


def perceptual_hashes(image: Image.Image) -> PerceptualHashes:
    """pHash, dHash and the pHash of the horizontally mirrored image, from one grayscale pass."""
    gray = _grayscale(image)
    lowfreq = phash_lowfreq(gray)
    mirrored = lowfreq * _mirror_signs(HASH_SIZE)
    return PerceptualHashes(
        phash=_median_bits(lowfreq),
        dhash=_dhash_bits(gray),
        phash_mirror=_median_bits(mirrored),
    )
