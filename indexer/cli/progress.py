"""CLI progress: a bar on a terminal, periodic log lines when stderr is redirected, nothing with --quiet."""

from __future__ import annotations

import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

import click
from tqdm import tqdm

from splitaudit.indexer.errors import SplitauditError
from splitaudit.indexer.pipeline.progress_log import DEFAULT_INTERVAL_S, ProgressLog

F = TypeVar("F", bound=Callable[..., object])


def progress_options(fn: F) -> F:
    """``--quiet`` and ``--progress-interval`` (env ``SPLITAUDIT_PROGRESS_INTERVAL``)."""
    fn = click.option(
        "--progress-interval",
        type=click.FloatRange(min=0.01),
        default=DEFAULT_INTERVAL_S,
        show_default=True,
        envvar="SPLITAUDIT_PROGRESS_INTERVAL",
        metavar="SECONDS",
        help="Seconds between progress lines when stderr is not a terminal (a log file, CI).",
    )(fn)
    return click.option(
        "-q", "--quiet", is_flag=True, help="No progress bar and no progress lines."
    )(fn)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _emit(line: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    click.echo(f"{stamp} {line}", err=True)


def _count_beside(
    count_total: Callable[[], int | None] | None, set_total: Callable[[int], None]
) -> None:
    """Count the total in a daemon thread, so a long walk never delays the work itself."""
    if count_total is None:
        return

    def run() -> None:
        try:
            total = count_total()
        except (OSError, tarfile.TarError, SplitauditError):
            return  # the count is only a hint: the run reports unreadable files itself
        if total:
            set_total(total)

    threading.Thread(target=run, name="progress-total", daemon=True).start()


@contextmanager
def counting_progress(
    desc: str,
    *,
    quiet: bool,
    interval_s: float,
    unit: str = "img",
    count_total: Callable[[], int | None] | None = None,
) -> Iterator[Callable[[int], None]]:
    """A callback taking the number of units just done; ``count_total`` may supply the total."""
    if quiet:
        yield lambda _n: None
    elif _stderr_is_terminal():
        with tqdm(unit=unit, desc=desc, dynamic_ncols=True, mininterval=0.5) as bar:

            def set_bar_total(total: int) -> None:
                bar.total = total

            _count_beside(count_total, set_bar_total)
            yield bar.update
    else:
        log = ProgressLog(desc, emit=_emit, unit=unit, interval_s=interval_s)

        def set_log_total(total: int) -> None:
            log.total = total

        _count_beside(count_total, set_log_total)
        yield log.advance
        log.finish()


@contextmanager
def fraction_progress(
    desc: str, *, quiet: bool, interval_s: float
) -> Iterator[Callable[[float, str], None]]:
    """A callback taking the overall fraction done (0..1) and the current phase."""
    if quiet:
        yield lambda _f, _m: None
    elif _stderr_is_terminal():
        with tqdm(
            total=100,
            desc=desc,
            unit="%",
            dynamic_ncols=True,
            mininterval=0.5,
            bar_format="{l_bar}{bar}| {elapsed} {postfix}",
        ) as bar:

            def update(fraction: float, message: str) -> None:
                bar.n = round(100 * fraction)
                bar.set_postfix_str(message, refresh=False)
                bar.refresh()

            yield update
    else:
        log = ProgressLog(desc, emit=_emit, interval_s=interval_s)
        yield log.set_fraction
        log.finish()
