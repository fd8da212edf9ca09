"""The records of one shard in batches (with their row numbers), and processing a whole shard at once."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import InputError
from splitaudit.indexer.pipeline.extract import extract_record
from splitaudit.indexer.pipeline.precomputed import is_precomputed
from splitaudit.indexer.pipeline.rows import PreparedBatch, prepare_batch
from splitaudit.indexer.sources.record import Record, Shard, Source


def record_batches(
    source: Source, shard: Shard, known: set[str], batch_size: int
) -> Iterator[tuple[list[int], list[Record]]]:
    """Records not stored yet, in batches, with their row numbers in the shard."""
    fresh = ((row, r) for row, r in enumerate(source.records(shard)) if r.key not in known)
    while chunk := list(islice(fresh, batch_size)):
        yield [row for row, _ in chunk], [r for _, r in chunk]


def shard_embeddings(
    source: Source, shard: Shard, dim: int | None
) -> npt.NDArray[np.floating] | None:
    """A precomputed source's (memory-mapped) embeddings of ``shard``, checked against ``dim``."""
    if not is_precomputed(source):
        return None
    emb = source.embeddings(shard)  # type: ignore[attr-defined]
    if dim is not None and emb.shape[1] != dim:
        raise InputError(
            f"{source.uri} shard {shard.name} holds embeddings of dim {emb.shape[1]}, but the "
            f"corpus's model has dim {dim}: it was computed with another model"
        )
    return emb  # type: ignore[no-any-return]


def process_shard(
    source: Source,
    shard: Shard,
    known: set[str],
    *,
    embedder: Embedder | None,
    batch_size: int,
    dim: int | None,
) -> list[PreparedBatch]:
    """Read, decode, hash and embed (or take the precomputed vectors of) a whole shard, in batches.

    This is what a Ray actor runs; the local executor does the same batch by batch, streaming.
    """
    emb = shard_embeddings(source, shard, dim)
    keep_image = embedder is not None and emb is None
    out: list[PreparedBatch] = []
    for rows, records in record_batches(source, shard, known, batch_size):
        extracted = [extract_record(r, keep_image=keep_image) for r in records]
        if emb is not None:
            out.append(prepare_batch(extracted, precomputed=np.asarray(emb[rows])))
        else:
            out.append(prepare_batch(extracted, embedder=embedder))
    return out
