"""Bits set in each element of an unsigned integer array: ``np.bitwise_count`` (numpy 2.0+), or
a 16-bit lookup table on numpy 1.26, which the core still supports (``numpy>=1.26``: ML stacks
pinned below numpy 2 are common). Same values and dtype (``uint8``) either way."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt


@functools.cache
def _table() -> npt.NDArray[np.uint8]:
    """Bits set in each 16-bit value, built once."""
    values = np.arange(1 << 16, dtype=np.uint32)
    counts = np.zeros(1 << 16, np.uint8)
    for bit in range(16):
        counts += ((values >> bit) & 1).astype(np.uint8)
    return counts


def table_popcount(x: Any) -> Any:
    """``popcount`` through the 16-bit table (the numpy 1.26 path; tested on any numpy)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"popcount of {arr.dtype} values: integers only")
    table = _table()
    width = arr.dtype.itemsize * 8
    if arr.dtype.kind == "i":  # as numpy counts them: the bits of the absolute value
        arr = np.abs(arr.astype(np.int64))
    flat = arr.astype(np.uint64)
    out = np.zeros(arr.shape, np.uint8)
    for shift in range(0, width, 16):
        out += table[((flat >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.intp)]
    return out if arr.ndim else out[()]


popcount = getattr(np, "bitwise_count", table_popcount)
