"""``bench.shape_search`` measures the search the audit runs, and checks it against FAISS."""

from __future__ import annotations

import numpy as np
import pytest

from bench.shape_search import descriptors, measure


def test_descriptors_are_non_negative_unit_rows() -> None:
    d = descriptors(np.random.default_rng(0), 250_001)  # past one 100,000-row chunk
    assert d.shape == (250_001, 128) and (d >= 0).all()
    np.testing.assert_allclose(np.linalg.norm(d[::5000], axis=1), 1.0, atol=1e-5)


def test_the_store_and_faiss_return_the_same_neighbours(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(1)
    cpu = measure(5_000, descriptors(rng, 50), rng)
    out = capsys.readouterr().out
    assert cpu >= 0 and "5,000 thumbnails" in out
    assert "same neighbours 1.0000" in out
