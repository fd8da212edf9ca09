"""Each candidate's zoom-in references, prepared once for every test image that has it.

The verifier's zoom-in search enlarges each candidate thumbnail at eight ``ZOOM_IN`` scales,
band-passes and Fourier-transforms it (``verify.zoomed_references``, ~1 ms a candidate). It
was prepared again for every test image the candidate belongs to: in a dedup every item is a
test image and a thumbnail has ~60 candidates, so each was prepared ~60 times (a dedup of
3,000 real thumbnails: 0.84x the CPU with this cache, docs/dedup.md). ``ZoomCache`` keeps them by candidate key (the corpus item
id) within one verification pass, the least recently used dropped past ``max_bytes``
(~70 KiB a candidate: the default holds ~7,000).

A candidate's references are computed in a batch with the other candidates first seen with
it, so they may differ from another batch's in the last bits of float32 (as they did between
test images before: BLAS products and FFTs of a stack do not round like those of one image).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.match.verify import (
    References,
    ZoomedReferences,
    prepare_references,
    zoom_rows,
    zoomed_references,
)

ZOOM_CACHE_BYTES = 512 * 2**20

_Entry = tuple[tuple[npt.NDArray[np.complex64], ...], tuple[npt.NDArray[np.float32], ...]]


class ZoomCache:
    """Zoom-in references by candidate key, least recently used dropped past ``max_bytes``."""

    def __init__(self, max_bytes: int = ZOOM_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.hits = 0  # candidates whose references were taken from here
        self.misses = 0  # candidates prepared
        self._held: OrderedDict[int, _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._held)

    @property
    def nbytes(self) -> int:
        """Bytes of the references held."""
        return self._bytes

    def references(
        self,
        keys: Sequence[int],
        thumbs: npt.NDArray[np.uint8],
        zoom_in: bool | npt.ArrayLike = True,
    ) -> References:
        """``prepare_references(thumbs, zoom_in)``, the zoom-in references of the candidates
        seen before taken from here. ``keys[i]`` names ``thumbs[i]`` (one key, one thumbnail)."""
        if len(keys) != len(thumbs):
            raise ValueError(f"{len(keys)} keys for {len(thumbs)} thumbnails")
        base = prepare_references(thumbs, False)
        rows = zoom_rows(zoom_in, len(thumbs))
        if not len(rows):
            return base
        wanted = [int(keys[r]) for r in rows.tolist()]
        found = {k: self._held[k] for k in wanted if k in self._held}
        row_of = dict(zip(wanted, rows.tolist(), strict=True))  # one key, one thumbnail
        fresh = [k for k in row_of if k not in found]
        if fresh:
            made = zoomed_references(thumbs[[row_of[k] for k in fresh]])
            for j, k in enumerate(fresh):
                found[k] = (
                    tuple(s[j].copy() for s in made.spectra),
                    tuple(v[j].copy() for v in made.inverse_norms),
                )
        self.hits += len(wanted) - len(fresh)
        self.misses += len(fresh)
        zoomed = ZoomedReferences(
            tuple(np.stack(z) for z in zip(*(found[k][0] for k in wanted), strict=True)),
            tuple(np.stack(z) for z in zip(*(found[k][1] for k in wanted), strict=True)),
        )
        self._hold(wanted, found)
        return References(base.vectors, base.ambiguity, zoomed, rows)

    def _hold(self, keys: list[int], found: dict[int, _Entry]) -> None:
        for k in keys:
            if k in self._held:
                self._held.move_to_end(k)
                continue
            self._held[k] = found[k]
            self._bytes += _size(found[k])
        while self._bytes > self.max_bytes and self._held:
            _, dropped = self._held.popitem(last=False)
            self._bytes -= _size(dropped)


def _size(entry: _Entry) -> int:
    return sum(a.nbytes for part in entry for a in part)
