"""Periodic one-line progress reports (done/total, rate, ETA) for logs where no progress bar shows."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

DEFAULT_INTERVAL_S = 10.0


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``2h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ProgressLog:
    """Counts work done and hands a line to ``emit`` at most once per ``interval_s``.

    Counted work (``advance``) reports ``done[/total] unit``, the rate and, with a total, the
    ETA; fractional work (``set_fraction``, e.g. an audit's phases) reports the percentage,
    the phase message and an ETA extrapolated from the elapsed time.
    """

    def __init__(
        self,
        what: str,
        *,
        emit: Callable[[str], None],
        unit: str = "img",
        total: int | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.unit, self.total = what, unit, total
        self._emit, self._interval, self._clock = emit, interval_s, clock
        self._start = self._last = clock()
        self.done = 0
        self._fraction: float | None = None
        self._message = ""
        self._emitted: tuple[int, float | None, str] | None = None

    def advance(self, n: int) -> None:
        """Record ``n`` more units done; emit a line when the interval has passed."""
        self.done += n
        self._maybe_emit()

    def set_fraction(self, fraction: float, message: str = "") -> None:
        """Record the overall fraction done (0..1) and the current phase; emit when due."""
        self._fraction, self._message = min(max(fraction, 0.0), 1.0), message
        self._maybe_emit()

    def finish(self) -> None:
        """Emit a last line when the run was long enough to report and moved since the last line."""
        if self._clock() - self._start >= self._interval and self._state() != self._emitted:
            self._emit_now()

    def _state(self) -> tuple[int, float | None, str]:
        return self.done, self._fraction, self._message

    def _maybe_emit(self) -> None:
        if self._clock() - self._last >= self._interval:
            self._emit_now()

    def _emit_now(self) -> None:
        self._last, self._emitted = self._clock(), self._state()
        self._emit(self.line())

    def line(self) -> str:
        """The current progress line."""
        elapsed = max(self._clock() - self._start, 1e-9)
        if self._fraction is not None:
            parts = [f"{self.what}: {100 * self._fraction:.0f}%"]
            if self._message:
                parts.append(self._message)
            parts.append(f"{format_duration(elapsed)} elapsed")
            if 0 < self._fraction < 1:
                parts.append(
                    f"ETA {format_duration(elapsed * (1 - self._fraction) / self._fraction)}"
                )
            return ", ".join(parts)
        rate = self.done / elapsed
        done = f"{self.done:,}" + (f"/{self.total:,}" if self.total else "")
        parts = [
            f"{self.what}: {done} {self.unit}",
            f"{rate:.1f} {self.unit}/s",
            f"{format_duration(elapsed)} elapsed",
        ]
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"ETA {format_duration((self.total - self.done) / rate)}")
        return ", ".join(parts)


def count_folder_images(sources: Sequence[object]) -> int | None:
    """The images the sources will yield (the total for progress lines); None when one cannot tell cheaply.

    Each count comes from the source itself (``count_hint()``: Parquet/Arrow metadata, a
    manifest's line scan, an archive's member list, tar headers) or from its registered
    format's ``count_images`` (a folder: a walk of names); see ``sources.registry``. Meant to
    run beside the indexing, never before it.
    """
    from splitaudit.indexer.sources.registry import cheap_image_count

    if not sources:
        return None
    total = 0
    for source in sources:
        n = cheap_image_count(source)
        if n is None:
            return None
        total += n
    return total


def try_count_images(sources: Sequence[object]) -> int | None:
    """``count_folder_images``, or None when a source cannot be read: the count is only a hint,
    and the run itself reports what is unreadable.

    An audit calls it before its first read of a split: every count is a footer or header read
    or a name walk, far cheaper than decoding the images (a manifest's line scan is cached and
    reused by its ``shards``)."""
    import tarfile

    from splitaudit.indexer.errors import SplitauditError

    try:
        return count_folder_images(sources)
    except (OSError, tarfile.TarError, SplitauditError):
        return None
