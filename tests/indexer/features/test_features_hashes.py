"""Hash64 value object, Hamming distance and FAISS byte packing."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.features.hashes import (
    Hash64,
    from_faiss_bytes,
    hamming,
    signed_to_unsigned,
    to_faiss_bytes,
    unsigned_to_signed,
)

EDGE_VALUES = [
    0,
    1,
    0x7FFF_FFFF_FFFF_FFFF,
    0x8000_0000_0000_0000,
    0xFFFF_FFFF_FFFF_FFFF,
    0xC3A5_0F1E_9B7D_2468,
]


@pytest.mark.parametrize("value", EDGE_VALUES)
def test_hex_round_trip(value: int) -> None:
    h = Hash64(value)
    text = h.hex()
    assert len(text) == 16
    assert text == text.lower()
    assert Hash64.from_hex(text) == h
    assert str(h) == text


def test_hex_is_most_significant_bit_first() -> None:
    assert Hash64(1 << 63).hex() == "8000000000000000"
    assert Hash64(0xAB).hex() == "00000000000000ab"
    assert Hash64.from_hex("  FFFFFFFFFFFFFFFF ").value == 2**64 - 1


@pytest.mark.parametrize("value", EDGE_VALUES)
def test_signed_round_trip(value: int) -> None:
    h = Hash64(value)
    signed = h.to_signed()
    assert -(2**63) <= signed < 2**63
    assert Hash64.from_signed(signed) == h


def test_signed_is_twos_complement() -> None:
    assert Hash64(2**64 - 1).to_signed() == -1
    assert Hash64(2**63).to_signed() == -(2**63)
    assert Hash64(5).to_signed() == 5
    assert Hash64.from_signed(-2).value == 2**64 - 2


def test_subtraction_is_hamming_distance() -> None:
    a = Hash64(0b1011)
    b = Hash64(0b0110)
    assert a - b == 3
    assert b - a == 3
    assert a - a == 0
    assert Hash64(0) - Hash64(2**64 - 1) == 64
    assert hamming(0b1011, 0b0110) == 3


def test_hash_is_frozen_and_hashable() -> None:
    h = Hash64(42)
    with pytest.raises(AttributeError):
        h.value = 1  # type: ignore[misc]
    assert {h, Hash64(42)} == {Hash64(42)}
    assert int(h) == 42
    assert repr(h) == "Hash64('000000000000002a')"


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, True])
def test_rejects_out_of_range_values(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        Hash64(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "abc", "zzzzzzzzzzzzzzzz", "00000000000000000"])
def test_from_hex_rejects_malformed_text(bad: str) -> None:
    with pytest.raises(ValueError, match="hex"):
        Hash64.from_hex(bad)


def test_from_signed_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="signed 64-bit"):
        Hash64.from_signed(2**63)


def test_faiss_bytes_are_big_endian_like_hex() -> None:
    values = np.array(EDGE_VALUES, dtype=np.uint64)
    codes = to_faiss_bytes(values)
    assert codes.shape == (len(EDGE_VALUES), 8)
    assert codes.dtype == np.uint8
    for row, value in zip(codes, EDGE_VALUES, strict=True):
        assert row.tobytes().hex() == Hash64(value).hex()
    assert np.array_equal(from_faiss_bytes(codes), values)


def test_faiss_binary_index_distance_is_hamming() -> None:
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**64, size=50, dtype=np.uint64)
    index = faiss.IndexBinaryFlat(64)
    index.add(to_faiss_bytes(values))
    query = values[7] ^ np.uint64(0b10110)  # three bits flipped
    distances, ids = index.search(to_faiss_bytes(np.array([query], dtype=np.uint64)), 1)
    assert ids[0, 0] == 7
    assert distances[0, 0] == 3 == hamming(int(query), int(values[7]))


def test_signed_array_views_round_trip() -> None:
    values = np.array(EDGE_VALUES, dtype=np.uint64)
    signed = unsigned_to_signed(values)
    assert signed.dtype == np.int64
    assert [int(s) for s in signed] == [Hash64(v).to_signed() for v in EDGE_VALUES]
    assert np.array_equal(signed_to_unsigned(signed), values)
