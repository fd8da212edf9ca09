"""CPU seconds per phase of a dedup run (hash join, vector join, engine, DB...), for logs and benches."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_END = object()


class PhaseClock:
    """Process CPU seconds and wall seconds accumulated under named phases.

    A phase may be entered many times (one per chunk); its times add up. Phases do not nest:
    time spent inside an inner phase is counted in both (callers keep them side by side).
    """

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the CPU and wall time of the ``with`` body under ``name``."""
        if not name:
            raise ValueError("a phase needs a name")
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{phase: {"cpu_s": ..., "wall_s": ...}}`` rounded to milliseconds, in first-use order."""
        return {
            name: {"cpu_s": round(cpu, 3), "wall_s": round(self.wall[name], 3)}
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
