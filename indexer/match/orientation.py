"""Pixel verification in the orientation the hash tier found: a copy turned or flipped.

The hash tier queries the pHashes of all eight orientations of the test image (the dihedral
group of the square: ``splitaudit.indexer.features.perceptual.ORIENTATIONS``) and records,
per pair, the orientation whose hash came closest. The verifier aligns shifts and scales (and
tries the left-right mirror itself), not quarter turns, so the test image is turned back by
that orientation before it is compared: one verifier call per orientation present.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.features.perceptual import (
    ORIENTATIONS,
    Orientation,
    inverse_orientation,
    orient,
    orient_array,
)
from splitaudit.indexer.match.verify import References, prepare_references, verify_scores
from splitaudit.indexer.popcount import popcount

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
# The verifier tries each query plain and mirrored, so o and (mirror, then o) need one call:
# a transpose of the mirror image is a quarter turn counter-clockwise, a transverse one clockwise.
_SAME_CALL: dict[Orientation, Orientation] = {
    "identity": "identity",
    "mirror": "identity",
    "flip": "rot180",
    "rot180": "rot180",
    "rot90": "rot90",
    "transpose": "rot90",
    "rot270": "rot270",
    "transverse": "rot270",
}


def closest_turn(
    oriented: npt.NDArray[np.uint64], corpus_phash: int, hamming: int | None
) -> tuple[int, Orientation] | None:
    """The turn or flip (not upright, not mirrored) whose pHash of the test image comes closest
    to the corpus image's, with its distance, where it beats ``hamming`` (the pair's distance
    so far; None: none); else None. ``oriented``: the test image's eight pHashes
    (``oriented_phashes``); ``corpus_phash`` may be stored signed (64-bit)."""
    if oriented.shape != (len(ORIENTATIONS),):
        raise ValueError(
            f"need one pHash per orientation ({len(ORIENTATIONS)}), got {oriented.shape}"
        )
    dists = popcount(oriented.astype(np.uint64) ^ np.uint64(corpus_phash & _MASK64))
    dists[[ORIENTATIONS.index("identity"), ORIENTATIONS.index("mirror")]] = 65
    best = int(np.argmin(dists))
    dist = int(dists[best])
    if dist > 64 or (hamming is not None and dist >= hamming):
        return None
    return dist, ORIENTATIONS[best]


def turned_back(
    query: Image.Image | npt.NDArray[np.uint8], orientation: Orientation
) -> Image.Image | npt.NDArray[np.uint8]:
    """The test image with ``orientation`` undone (an image or a thumbnail array)."""
    undo = inverse_orientation(orientation)
    if isinstance(query, np.ndarray):
        return orient_array(query, undo)  # type: ignore[return-value]
    return orient(query, undo)


def oriented_verify_scores(
    query: Image.Image | npt.NDArray[np.uint8],
    orientations: Sequence[Orientation],
    candidates: npt.NDArray[np.uint8] | References,
    zoom_in: bool | npt.ArrayLike = True,
) -> tuple[npt.NDArray[np.float32], list[Orientation]]:
    """``verify_scores`` of ``query`` against each candidate, upright and, for a pair whose
    pHash came closest turned or flipped (``orientations[i]`` for candidate ``i``), also with
    the query turned back by that orientation; the better score and the orientation it was
    found in (order kept).

    Every pair keeps its upright score: the closest of eight pHashes of an unrelated or
    shifted pair is often a turned one, by chance, and must not cost the upright alignment.
    """
    zoom = np.broadcast_to(np.asarray(zoom_in, dtype=bool), (len(orientations),))
    references = prepare_references(candidates, zoom)
    scores = verify_scores(query, references, zoom)
    found: list[Orientation] = [name if name == "mirror" else "identity" for name in orientations]
    groups: dict[Orientation, list[int]] = defaultdict(list)
    for n, name in enumerate(orientations):
        if _SAME_CALL[name] != "identity":
            groups[_SAME_CALL[name]].append(n)
    for name, rows in groups.items():
        turned = verify_scores(turned_back(query, name), references.take(rows), zoom[rows])
        for n, score in zip(rows, turned.tolist(), strict=True):
            if score > scores[n]:
                scores[n], found[n] = score, orientations[n]
    return scores, found
