"""Vectorised MinHash over hashed word shingles, LSH band keys, and the shared word span.

A signature is ``num_perm`` minima of universal hashes ``(a * x + b) mod 2**64 >> 32`` (odd
``a``: Dietzfelbinger's multiply-shift) over a caption's shingle hashes; equal positions of two
signatures estimate the Jaccard similarity of their shingle sets. Band ``j`` of a signature is
hashed to one 32-bit key; two captions become candidates when any band key is equal, so a pair
with Jaccard ``s`` is found with probability ``1 - (1 - s**rows)**bands``
(:func:`candidate_probability`). Everything runs on numpy arrays, a chunk of captions at a time.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.captions.normalize import mix64

__all__ = [
    "EMPTY_SLOT",
    "LshParams",
    "band_keys",
    "candidate_probability",
    "estimate_jaccard",
    "longest_shared_span",
    "signatures",
]

EMPTY_SLOT = np.uint32(0xFFFFFFFF)  # a caption without shingles: every slot stays "no minimum"
# Captions hashed at once (~11 shingles each x num_perm uint64 temporaries: ~45 MiB at 64).
_BLOCK_CAPTIONS = 8_192


@dataclass(frozen=True, slots=True)
class LshParams:
    """MinHash length and banding (``bands * rows == num_perm``) plus the permutation seed."""

    num_perm: int = 128
    bands: int = 32
    rows: int = 4
    seed: int = 20261201

    def __post_init__(self) -> None:
        if self.bands * self.rows != self.num_perm or self.num_perm <= 0:
            raise ValueError(
                f"LSH bands x rows must equal num_perm ({self.bands} x {self.rows} != {self.num_perm})"
            )

    def permutations(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """The ``(a, b)`` multipliers (odd) and offsets of the ``num_perm`` hash functions."""
        rng = np.random.default_rng(self.seed)
        a = rng.integers(1, 2**63, self.num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        b = rng.integers(0, 2**63, self.num_perm, dtype=np.uint64)
        return a, b

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for the index sidecar)."""
        return asdict(self)


def signatures(
    keys: npt.NDArray[np.uint64],
    owner: npt.NDArray[np.int64],
    n_captions: int,
    params: LshParams,
) -> npt.NDArray[np.uint32]:
    """MinHash signatures ``(n_captions, num_perm)`` of shingle hashes ``keys`` (``owner``: caption row).

    ``owner`` must be non-decreasing (shingles grouped by caption); a caption without any shingle
    gets a row of :data:`EMPTY_SLOT`.
    """
    a, b = params.permutations()
    sig = np.full((n_captions, params.num_perm), EMPTY_SLOT, np.uint32)
    if not len(keys):
        return sig
    # Whole captions per block, so np.minimum.reduceat sees each caption once. Permutations are
    # the rows and shingles the contiguous axis: reduceat along it is ~6x faster than across.
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    for first in range(0, len(starts), _BLOCK_CAPTIONS):
        block = starts[first : first + _BLOCK_CAPTIONS]
        lo = int(block[0])
        hi = int(starts[first + len(block)]) if first + len(block) < len(starts) else len(keys)
        # min then shift == shift then min (the shift keeps order), so the minima are taken on
        # the raw products and only the (n, num_perm) result is shifted: two passes fewer.
        with np.errstate(over="ignore"):
            hashed = np.multiply.outer(a, keys[lo:hi])
            hashed += b[:, None]
        low = np.minimum.reduceat(hashed, block - lo, axis=1)
        sig[owner[block]] = (low >> np.uint64(32)).astype(np.uint32).T
    return sig


def band_keys(sig: npt.NDArray[np.uint32], params: LshParams) -> npt.NDArray[np.uint32]:
    """One 32-bit key per band: ``(n, bands)``; equal keys = equal band (up to 2**-32 collisions)."""
    n = sig.shape[0]
    acc = np.zeros((n, params.bands), np.uint64)
    shaped = sig.reshape(n, params.bands, params.rows).astype(np.uint64)
    for r in range(params.rows):
        salt = np.uint64(((r + 1) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
        with np.errstate(over="ignore"):
            acc = mix64(acc ^ (shaped[:, :, r] + salt))
    band_ids = np.arange(params.bands, dtype=np.uint64)[None, :]
    return (mix64(acc ^ band_ids) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def estimate_jaccard(
    query: npt.NDArray[np.integer[Any]], corpus: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.float32]:
    """Fraction of equal signature slots, row by row (``query`` and ``corpus`` of equal shape)."""
    if not len(query):
        return np.zeros(0, np.float32)
    return (query == corpus).mean(axis=1, dtype=np.float32)


def candidate_probability(jaccard: float, params: LshParams) -> float:
    """Probability that a pair with this Jaccard similarity shares at least one band."""
    return float(1.0 - (1.0 - jaccard**params.rows) ** params.bands)


def longest_shared_span(a: Sequence[str], b: Sequence[str]) -> tuple[int, int, int]:
    """The longest run of words common to ``a`` and ``b``: ``(start in a, start in b, length)``."""
    matcher = difflib.SequenceMatcher(None, list(a), list(b), autojunk=False)
    m = matcher.find_longest_match(0, len(a), 0, len(b))
    return m.a, m.b, m.size
