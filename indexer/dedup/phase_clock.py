"""CPU seconds per phase of a dedup run (hash join, vector join, engine, DB...), for logs and benches."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from splitaudit.indexer.match.phases import PhaseTimes

T = TypeVar("T")
_END = object()


class PhaseClock(PhaseTimes):
    """``PhaseTimes`` (wall seconds per named phase) with the process CPU seconds beside them.

    A phase may be entered many times (one per chunk); its times add up. Phases do not nest:
    time spent inside an inner phase is counted in both (callers keep them side by side).
    """

    def __init__(self) -> None:
        super().__init__()
        self.cpu: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the CPU and wall time of the ``with`` body under ``name``."""
        if not name:
            raise ValueError("a phase needs a name")
        cpu = time.process_time()
        try:
            with super().phase(name):
                yield
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{phase: {"cpu_s": ..., "wall_s": ...}}`` rounded to milliseconds, in first-use order."""
        return {
            name: {"cpu_s": round(cpu, 3), "wall_s": round(self.seconds[name], 3)}
            for name, cpu in self.cpu.items()
        }


def timed_iter(items: Iterable[T], clock: PhaseClock | None, name: str) -> Iterator[T]:
    """``items`` with the time spent producing each one counted under ``name``."""
    it = iter(items)
    while True:
        if clock is None:
            got = next(it, _END)
        else:
            with clock.phase(name):
                got = next(it, _END)
        if got is _END:
            return
        yield got  # type: ignore[misc]
