"""Wall time per phase of an audit, logged once at the end (``bench.audit_throughput`` reads it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


class PhaseTimes:
    """Accumulated wall seconds per named phase; nested phases are not subtracted from outer ones."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent in the ``with`` block to ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to phase ``name``."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def summary(self) -> str:
        """``audit phases (TOTAL s): name 1.2 s, ...``, in order of first use."""
        total = time.perf_counter() - self._started
        parts = ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items())
        return f"audit phases ({total:.2f} s): {parts}"

    def log(self) -> None:
        """Log the summary at INFO (``splitaudit -v audit`` shows it)."""
        log.info("%s", self.summary())
