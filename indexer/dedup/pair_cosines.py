"""Cosines of chosen item pairs, from one pass over a corpus's vector batches.

Dedup asks for the cosine of pairs its hash joins found (the second witness of a lone pHash
match, the pHash k-NN pairs a cosine may vouch for) without a vector index to reconstruct
from: the batches are streamed once and only the rows of those pairs are held."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.store.sorted_lookup import member

VectorChunks = Callable[[], Iterable[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]]


def pair_cosines(
    a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], vectors: VectorChunks
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float32]]:
    """For pairs ``(a[i], b[i])``: whether both items have a vector among the streamed
    ``vectors`` chunks, and the cosine (dot product of the stored unit vectors) of those that
    do, in pair order."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    needed = np.unique(np.r_[a, b])
    got_ids: list[npt.NDArray[np.int64]] = []
    got_vecs: list[npt.NDArray[np.float32]] = []
    for chunk_ids, chunk_vecs in vectors():
        mask = member(needed, np.asarray(chunk_ids, np.int64))
        if mask.any():
            got_ids.append(np.asarray(chunk_ids, np.int64)[mask])
            got_vecs.append(np.asarray(chunk_vecs, np.float32)[mask])
    if not got_ids:
        return np.zeros(len(a), bool), np.zeros(0, np.float32)
    vid = np.concatenate(got_ids)
    order = np.argsort(vid, kind="stable")
    vid, vec = vid[order], np.concatenate(got_vecs)[order]
    have = member(vid, a) & member(vid, b)
    pa, pb = np.searchsorted(vid, a[have]), np.searchsorted(vid, b[have])
    return have, np.einsum("ij,ij->i", vec[pa], vec[pb]).astype(np.float32, copy=False)
