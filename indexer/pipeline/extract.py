"""Mapper stage: record -> bytes -> features (+ the small image for the embedder), in workers."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.pool import AsyncResult, Pool

from PIL import Image

from indexer.errors import ImageDecodeError
from indexer.features.extract import extract_features
from indexer.features.types import ImageFeatures
from indexer.sources.record import Record


@dataclass(frozen=True, slots=True)
class Extracted:
    """The mapper's output for one record: features, or the reason it failed."""

    record: Record
    features: ImageFeatures | None = None
    image: Image.Image | None = None
    error: str | None = None


def extract_record(record: Record, *, keep_image: bool) -> Extracted:
    """Read and decode one record; every problem becomes ``error``, never an exception."""
    if record.error:
        return Extracted(record, error=record.error)
    try:
        data = record.read_bytes()
    except OSError as exc:
        return Extracted(record, error=f"cannot read {record.locator.uri()}: {exc.strerror or exc}")
    try:
        features, image = extract_features(data, keep_image=keep_image)
    except ImageDecodeError as exc:
        return Extracted(record, error=str(exc))
    except Exception as exc:  # a decoder bug must not kill a million-image run
        return Extracted(record, error=f"cannot decode image: {type(exc).__name__}: {exc}")
    return Extracted(record, features=features, image=image)


class Extractor:
    """Runs ``extract_record`` over batches, in-process or in a pool of worker processes.

    ``map_batches`` keeps one batch in flight ahead of the consumer, so decoding overlaps
    embedding and DB writes while memory stays bounded to two batches.
    """

    def __init__(self, *, workers: int, keep_image: bool) -> None:
        self.keep_image = keep_image
        self._fn = partial(extract_record, keep_image=keep_image)
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
        """Yield extracted batches in order, prefetching the next one in the pool."""
        if self._pool is None:
            for batch in batches:
                yield [self._fn(r) for r in batch]
            return
        pending: AsyncResult[list[Extracted]] | None = None
        for batch in batches:
            nxt = self._pool.map_async(self._fn, batch, chunksize=max(1, len(batch) // 16))
            if pending is not None:
                yield pending.get()
            pending = nxt
        if pending is not None:
            yield pending.get()
