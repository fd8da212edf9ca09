"""64-bit hash values: hex / signed round trips, Hamming distance, FAISS binary packing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

_MASK64 = (1 << 64) - 1
_SIGN_BIT = 1 << 63


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two unsigned 64-bit hash ints."""
    return ((a ^ b) & _MASK64).bit_count()


@dataclass(frozen=True, slots=True)
class Hash64:
    """A 64-bit image hash (imagehash style): ``a - b`` is the Hamming distance.

    ``value`` is unsigned (``0 <= value < 2**64``); bit 63 is the first bit of the 8x8 bit
    grid (row-major), so ``hex()`` reads like imagehash's ``str(hash)``. The provenance DB
    stores hashes as signed 64-bit integers: use ``to_signed()`` / ``from_signed()``.
    """

    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            raise TypeError(f"Hash64 value must be an int, got {type(self.value).__name__}")
        if not 0 <= self.value <= _MASK64:
            raise ValueError(f"Hash64 value must be in [0, 2**64), got {self.value}")

    def hex(self) -> str:
        """16 lowercase hex digits, most significant bit first."""
        return f"{self.value:016x}"

    @classmethod
    def from_hex(cls, text: str) -> Hash64:
        """Parse 16 hex digits as written by ``hex()``."""
        cleaned = text.strip()
        if len(cleaned) != 16:
            raise ValueError(f"a 64-bit hash needs 16 hex digits, got {len(cleaned)}: {text!r}")
        try:
            return cls(int(cleaned, 16))
        except ValueError:
            raise ValueError(f"not a hex hash: {text!r}") from None

    def to_signed(self) -> int:
        """The same 64 bits as an int64 (two's complement), as stored in the DB."""
        return self.value - (1 << 64) if self.value & _SIGN_BIT else self.value

    @classmethod
    def from_signed(cls, signed: int) -> Hash64:
        """Inverse of ``to_signed()``: accept an int64 from the DB."""
        if not -_SIGN_BIT <= signed < _SIGN_BIT:
            raise ValueError(f"not a signed 64-bit integer: {signed}")
        return cls(signed & _MASK64)

    def __sub__(self, other: Hash64) -> int:
        if not isinstance(other, Hash64):
            return NotImplemented
        return hamming(self.value, other.value)

    def __int__(self) -> int:
        return self.value

    def __str__(self) -> str:
        return self.hex()

    def __repr__(self) -> str:
        return f"Hash64('{self.hex()}')"


def bits_to_int(bits: npt.NDArray[np.bool_]) -> int:
    """Pack a boolean array (first element = most significant bit) into an unsigned int."""
    packed = np.packbits(np.asarray(bits, dtype=np.bool_).ravel())
    return int.from_bytes(packed.tobytes(), "big")


def to_faiss_bytes(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    """Unsigned hashes -> ``(n, 8)`` uint8 codes for a FAISS binary index (big-endian, like ``hex()``)."""
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.uint64).reshape(-1), dtype=">u8")
    return arr.view(np.uint8).reshape(-1, 8)


def from_faiss_bytes(codes: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """Inverse of ``to_faiss_bytes``: ``(n, 8)`` uint8 codes -> unsigned hashes."""
    arr = np.ascontiguousarray(np.asarray(codes, dtype=np.uint8).reshape(-1, 8))
    return arr.view(">u8").reshape(-1).astype(np.uint64)


def signed_to_unsigned(values: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Reinterpret int64 hashes read from the DB as uint64 (no copy of bits changed)."""
    return np.asarray(values, dtype=np.int64).view(np.uint64)


def unsigned_to_signed(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Reinterpret uint64 hashes as int64 for storage in the DB."""
    return np.asarray(values, dtype=np.uint64).view(np.int64)
