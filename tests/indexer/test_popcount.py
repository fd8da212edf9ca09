"""``popcount``: numpy's own where it has one, the 16-bit table on numpy 1.26; same values."""

from __future__ import annotations

import numpy as np
import pytest

from splitaudit.indexer.popcount import popcount, table_popcount


def _reference(values: np.ndarray) -> list[int]:
    return [bin(abs(int(v))).count("1") for v in values.ravel()]


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int64, np.intp])
def test_table_counts_like_python(dtype: type) -> None:
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size=(7, 9), dtype=dtype, endpoint=True)
    values.ravel()[:2] = [info.min, info.max]
    got = table_popcount(values)
    assert got.dtype == np.uint8 and got.shape == values.shape
    assert got.ravel().tolist() == _reference(values)
    if hasattr(np, "bitwise_count"):  # numpy 2: the table gives numpy's own values
        assert np.array_equal(got, np.bitwise_count(values))


def test_scalars_and_the_chosen_implementation() -> None:
    assert int(table_popcount(np.uint64(2**64 - 1))) == 64
    assert int(popcount(np.uint64(0b1011))) == 3
    diffs = np.array([0, 1, 2**63, 2**64 - 1], np.uint64)
    assert popcount(diffs).tolist() == [0, 1, 1, 64]
    with pytest.raises(TypeError):
        table_popcount(np.array([1.5]))
