"""The dedup phase clock adds up CPU and wall time per named phase."""

from __future__ import annotations

import time

import pytest

from splitaudit.indexer.dedup.phase_clock import PhaseClock, timed_iter


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_phases_add_up_across_entries_and_keep_their_order() -> None:
    clock = PhaseClock()
    for _ in range(3):
        with clock.phase("engine"):
            _spin(0.02)
    with clock.phase("clusters"):
        pass
    out = clock.to_dict()
    assert list(out) == ["engine", "clusters"]
    assert out["engine"]["cpu_s"] >= 0.06 > out["clusters"]["cpu_s"]
    assert out["engine"]["wall_s"] >= out["engine"]["cpu_s"] - 0.01


def test_a_failing_body_is_still_counted_and_raises() -> None:
    clock = PhaseClock()
    with pytest.raises(RuntimeError), clock.phase("read"):
        _spin(0.01)
        raise RuntimeError("boom")
    assert clock.cpu["read"] >= 0.01


def test_a_phase_needs_a_name() -> None:
    with pytest.raises(ValueError, match="needs a name"), PhaseClock().phase(""):
        pass


def test_timed_iter_counts_producing_not_consuming() -> None:
    def slow() -> object:
        for i in range(3):
            _spin(0.02)
            yield i

    clock = PhaseClock()
    got = []
    for item in timed_iter(slow(), clock, "chunks"):
        _spin(0.02)  # the consumer's time is not the producer's
        got.append(item)
    assert got == [0, 1, 2]
    assert 0.06 <= clock.cpu["chunks"] < 0.1
    assert list(timed_iter(iter([1, None, 2]), None, "x")) == [1, None, 2]
