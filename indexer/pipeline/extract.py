"""Mapper stage: record -> bytes -> features (+ the small image for the embedder), in workers."""

from __future__ import annotations

import multiprocessing as mp
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.pool import AsyncResult, Pool
from typing import TypeVar

from PIL import Image

from splitaudit.indexer.errors import ImageDecodeError
from splitaudit.indexer.features.decode import scrub_reprs
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.types import ImageFeatures
from splitaudit.indexer.sources.record import Record

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Extracted:
    """The mapper's output for one record: features, or the reason it failed."""

    record: Record
    features: ImageFeatures | None = None
    image: Image.Image | None = None
    error: str | None = None


def extract_record(record: Record, *, keep_image: bool) -> Extracted:
    """Read and decode one record; every problem becomes ``error``, never an exception.

    Without ``keep_image`` nothing is embedded, so the decode is at need: JPEGs are decoded at
    the smallest scale the hashes use (``extract_features(hashes_only=True)``).
    """
    if record.error:
        return Extracted(record, error=record.error)
    try:
        data = record.read_bytes()
    except OSError as exc:
        reason = scrub_reprs(str(exc.strerror or exc))
        return Extracted(record, error=f"cannot read {record.locator.uri()}: {reason}")
    try:
        features, image = extract_features(data, keep_image=keep_image, hashes_only=not keep_image)
    except ImageDecodeError as exc:
        return Extracted(record, error=str(exc))
    except Exception as exc:  # a decoder bug must not kill a million-image run
        reason = scrub_reprs(str(exc))
        return Extracted(record, error=f"cannot decode image: {type(exc).__name__}: {reason}")
    return Extracted(record, features=features, image=image)


def extract_records(records: Sequence[Record], *, keep_image: bool) -> list[Extracted]:
    """``extract_record`` over a run of records: one pool task, one round trip per run."""
    return [extract_record(r, keep_image=keep_image) for r in records]


def split_evenly(items: Sequence[T], parts: int) -> list[Sequence[T]]:
    """``items`` cut into at most ``parts`` contiguous runs whose lengths differ by at most one."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    runs, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        runs.append(items[start:end])
        start = end
    return runs


class Extractor:
    """Runs ``extract_record`` over batches, in-process or in a pool of worker processes.

    In a pool each batch becomes one contiguous run of records per worker (one task and one
    result message per worker, instead of a task per few images), and ``PREFETCH`` batches are
    kept in flight ahead of the consumer, so the workers keep decoding while this process embeds
    and commits. Memory stays bounded to ``PREFETCH + 1`` batches.
    """

    PREFETCH = 2

    def __init__(self, *, workers: int, keep_image: bool) -> None:
        self.keep_image = keep_image
        self.workers = workers
        self._fn = partial(extract_record, keep_image=keep_image)
        self._runs = partial(extract_records, keep_image=keep_image)
        self._pool: Pool | None = None
        if workers > 1:
            self._pool = mp.get_context("fork").Pool(workers)

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def map_batches(self, batches: Iterator[Sequence[Record]]) -> Iterator[list[Extracted]]:
        """Yield extracted batches in order, prefetching the next ones in the pool."""
        if self._pool is None:
            for batch in batches:
                yield [self._fn(r) for r in batch]
            return
        pending: deque[AsyncResult[list[list[Extracted]]]] = deque()
        for batch in batches:
            runs = split_evenly(list(batch), self.workers)
            pending.append(self._pool.map_async(self._runs, runs, chunksize=1))
            if len(pending) > self.PREFETCH:
                yield _joined(pending.popleft().get())
        while pending:
            yield _joined(pending.popleft().get())


def _joined(runs: list[list[Extracted]]) -> list[Extracted]:
    return [e for run in runs for e in run]
