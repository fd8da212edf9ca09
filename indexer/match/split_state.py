"""The query side of matching: in-memory arrays over the readable items of a test split."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.match.inset_candidates import RegionVectors


@dataclass
class SplitState:
    """In-memory arrays over the readable items of a split (test splits are small).

    Row ``i`` of every array is split item ``ids[i]``; ``vectors[model_id]`` holds the
    L2-normalised embeddings under each model a selected corpus uses.
    """

    ids: npt.NDArray[np.int64]
    keys: list[str]
    labels: list[str | None]
    sha256: list[str]
    pixel: list[str | None]
    stream: list[str | None]  # JPEG stream digests (None: not a JPEG, or unparsable)
    phash: npt.NDArray[np.uint64]
    phash_mirror: npt.NDArray[np.uint64]
    min_side: npt.NDArray[np.int32]
    thumbs: npt.NDArray[np.uint8]  # (n, 32, 32) verification thumbnails
    vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    # row -> the decoded image (``decode_image(...).image``) of the first rows, up to
    # ``KEPT_IMAGES_BYTES``: what the verification step would otherwise decode again
    images: dict[int, Image.Image] = field(default_factory=dict)
    # (n, 8) pHashes with each of ``perceptual.ORIENTATIONS`` undone (column 0 = ``phash``, 1 =
    # ``phash_mirror``): the hash tier queries all eight. None: plain and mirrored only.
    phash_oriented: npt.NDArray[np.uint64] | None = None
    # model id -> embeddings of regions of the large test images (``inset_candidates``): a
    # corpus image inset in a screenshot is nominated by the region holding it.
    regions: dict[str, RegionVectors] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)
