"""Boilerplate: corpus frequency of shingles and captions, and the rules that keep it from matching.

Three layers keep boilerplate from ever making a caption match on its own:

1. fixed phrases (``image may contain``, ``stock photo``, ...) are cut out before shingling
   (:func:`splitaudit.indexer.captions.normalize.content_tokens`);
2. a caption with fewer than ``min_tokens`` content words (empty, one-word, tag lists such as
   ``image may contain: sky, tree``) never matches, exact or near;
3. corpus frequency, measured at index time: a shingle in at least ``common_fraction`` of the
   corpus captions (and ``common_min_count`` of them) is *common* ("on the", "at night", a
   site's stock suffix) and does not count towards the informative shingles a near match must
   share; a normalised caption repeated in ``common_fraction`` of the corpus is a stock caption
   and never matches exactly.

Shingle frequencies live in a fixed-size count sketch (:class:`ShingleFrequency`, one counter per
hash bucket): a rare shingle can only be over-counted when it shares a bucket with a common one,
which with a few hundred common shingles in 4M buckets happens to ~0.01 % of them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

__all__ = ["BoilerplateRules", "ShingleFrequency"]

SKETCH_BITS = 22


@dataclass(frozen=True, slots=True)
class BoilerplateRules:
    """When text is too generic to match (see the module docstring)."""

    min_tokens: int = 5
    common_fraction: float = 0.01
    common_min_count: int = 50
    min_informative_shared: int = 2

    def common_count(self, corpus_captions: int) -> int:
        """How many corpus captions must hold a shingle (or a caption) for it to be common."""
        return max(self.common_min_count, int(np.ceil(self.common_fraction * corpus_captions)))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (recorded with every caption match's thresholds)."""
        return asdict(self)


class ShingleFrequency:
    """How many corpus captions hold each shingle: a count sketch of ``2**SKETCH_BITS`` buckets."""

    def __init__(self, counts: npt.NDArray[np.uint32] | None = None, captions: int = 0) -> None:
        self.counts = counts if counts is not None else np.zeros(1 << SKETCH_BITS, np.uint32)
        self.captions = captions

    def add(
        self, keys: npt.NDArray[np.uint64], owner: npt.NDArray[np.int64], captions: int
    ) -> None:
        """Count the shingles of a batch of ``captions`` captions (each once per caption)."""
        self.captions += captions
        if not len(keys):
            return
        span = int(owner.max()) + 1
        pairs = _bucket(keys) * span + owner  # one (bucket, caption) pair per shingle
        pairs.sort()
        distinct = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
        self.counts += np.bincount(distinct // span, minlength=len(self.counts)).astype(np.uint32)

    def frequency(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint32]:
        """Corpus captions holding each shingle (an upper bound, see the module docstring)."""
        return self.counts[_bucket(keys)]

    def common(
        self, keys: npt.NDArray[np.uint64], rules: BoilerplateRules
    ) -> npt.NDArray[np.bool_]:
        """Which of ``keys`` are common shingles under ``rules``."""
        return self.frequency(keys) >= rules.common_count(self.captions)

    def save(self, fh: BinaryIO) -> None:
        """Write the counters (``np.save``) to an open file (the caller makes it atomic)."""
        np.save(fh, self.counts)

    @classmethod
    def load(cls, path: Path, captions: int) -> ShingleFrequency:
        """Read counters written by :meth:`save`; ``captions`` comes from the sidecar."""
        counts = np.load(path)
        if counts.shape != (1 << SKETCH_BITS,) or counts.dtype != np.uint32:
            raise ValueError(f"{path} is not a shingle-frequency sketch")
        return cls(counts, captions)


def _bucket(keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    return (keys >> np.uint64(64 - SKETCH_BITS)).astype(np.int64)
