"""Mapper stage: record -> bytes -> features (+ the small image for the embedder), in workers."""

from __future__ import annotations

import multiprocessing as mp
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from multiprocessing.pool import AsyncResult, Pool
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import ImageDecodeError
from splitaudit.indexer.features.decode import scrub_reprs
from splitaudit.indexer.features.embed_input import ResizeCrop
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.types import ImageFeatures
from splitaudit.indexer.match.verify import verify_thumbnail
from splitaudit.indexer.sources.record import Record

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Extracted:
    """The mapper's output for one record: features, or the reason it failed."""

    record: Record
    features: ImageFeatures | None = None
    image: Image.Image | None = None
    error: str | None = None
    vector: npt.NDArray[np.float32] | None = None  # embedded in the worker (``forward``)


def extract_record(
    record: Record, *, keep_image: bool, embed_input: ResizeCrop | None = None
) -> Extracted:
    """Read and decode one record; every problem becomes ``error``, never an exception.

    Without ``keep_image`` nothing is embedded, so the decode is at need: JPEGs are decoded at
    the smallest scale the hashes use (``extract_features(hashes_only=True)``). With
    ``embed_input`` the kept image is the embedder's crop, not the <=256 px working copy.
    """
    if record.error:
        return Extracted(record, error=record.error)
    try:
        data = record.read_bytes()
    except OSError as exc:
        reason = scrub_reprs(str(exc.strerror or exc))
        return Extracted(record, error=f"cannot read {record.locator.uri()}: {reason}")
    try:
        features, image = extract_features(
            data,
            keep_image=keep_image,
            hashes_only=not keep_image,
            embed_input=embed_input,
            thumbnail=verify_thumbnail,
        )
    except ImageDecodeError as exc:
        return Extracted(record, error=str(exc))
    except Exception as exc:  # a decoder bug must not kill a million-image run
        reason = scrub_reprs(str(exc))
        return Extracted(record, error=f"cannot decode image: {type(exc).__name__}: {reason}")
    return Extracted(record, features=features, image=image)


def extract_records(
    records: Sequence[Record],
    *,
    keep_image: bool,
    embed_input: ResizeCrop | None = None,
    forward: Embedder | None = None,
) -> list[Extracted]:
    """``extract_record`` over a run of records: one pool task, one round trip per run.

    With ``forward`` (``worker_forward``) the run's images are embedded here too, and each
    result carries its vector instead of its image.
    """
    out = [extract_record(r, keep_image=keep_image, embed_input=embed_input) for r in records]
    if forward is None:
        return out
    done = [i for i, e in enumerate(out) if e.image is not None]
    if done:
        vectors = forward.embed([out[i].image for i in done])  # type: ignore[misc]
        for i, vector in zip(done, vectors, strict=True):
            out[i] = replace(out[i], image=None, vector=vector)
    return out


def worker_forward(embedder: Embedder | None, workers: int) -> Embedder | None:
    """The embedder the decode workers run themselves (``ExportedEmbedder.in_workers``: a small
    exported model, one inference thread per worker), or None where the main process embeds
    (no pool, no embedder, another kind of embedder, a large model)."""
    in_workers = getattr(embedder, "in_workers", None)
    if workers < 2 or in_workers is None:
        return None
    forward: Embedder | None = in_workers()
    return forward


def embed_input_of(embedder: Embedder | None) -> ResizeCrop | None:
    """The embedder's eval geometry as a ``ResizeCrop`` (short-side resize, then a centre crop
    no larger than it), or None when it has another one (or none that can be read).

    The workers then cut the embedder's input out of each decode themselves
    (``ResizeCrop.apply``), so the embedder's own resize and crop find nothing left to do.
    """
    preprocess: Any = getattr(embedder, "preprocess", None)
    description = getattr(preprocess, "description", None)  # ArrayPreprocess (cached export)
    if description is None and getattr(preprocess, "transform", None) is not None:
        from splitaudit.indexer.embed.backends.array_preprocess import describe

        try:  # BatchPreprocess: the torch-loaded model's transform (torchvision is loaded)
            description = describe(preprocess.transform)
        except Exception:  # a transform describe() cannot read: keep the working copy
            return None
    if not description:
        return None
    steps = description.get("geometry", [])
    if len(steps) != 2 or [s.get("op") for s in steps] != ["resize", "center_crop"]:
        return None
    resize, crop = steps
    if len(resize["size"]) != 1 or resize.get("max_size") is not None:
        return None
    try:
        return ResizeCrop(
            size=int(resize["size"][0]),
            crop_height=int(crop["size"][0]),
            crop_width=int(crop["size"][1]),
            resample=int(resize["resample"]),
        )
    except ValueError:  # a crop larger than the resize (padding) or an unfiltered resample
        return None


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
    and commits. Memory stays bounded to ``PREFETCH + 1`` batches. ``embed_input``
    (``embed_input_of(embedder)``) has the workers hand over the embedder's crop instead of the
    <=256 px working copy, for runs that only embed it (indexing). ``forward``
    (``worker_forward(embedder, workers)``) has the pool's workers embed their crops too and
    hand over vectors (``Extracted.vector``); without a pool it is not used.
    """

    PREFETCH = 2

    def __init__(
        self,
        *,
        workers: int,
        keep_image: bool,
        embed_input: ResizeCrop | None = None,
        forward: Embedder | None = None,
    ) -> None:
        self.keep_image = keep_image
        self.workers = workers
        self._fn = partial(extract_record, keep_image=keep_image, embed_input=embed_input)
        self._runs = partial(
            extract_records,
            keep_image=keep_image,
            embed_input=embed_input,
            forward=forward if workers > 1 and keep_image else None,
        )
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
