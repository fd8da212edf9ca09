"""A pixel verifier's verdict resting on a shared overlay, refused.

The verifier (``verify``) compares two 32-px thumbnails, band-passed. Two different photos
under one window chrome, frame or set of caption bands share most of that thumbnail's
structure: their score can pass ``verify_score`` though nothing of the photos agrees
(``bench.inset_regions``, seed 1: an unrelated photo shown in a screenshot's window, verify
0.742 and 0.744 against two corpus photos under the same chrome, near by that rule alone).
On a large pair the geometric step then finds no fit to check (3 scattered inliers), so the
content check that refuses fits on overlays (``content_check``) never ran.

``refuse_overlay_verdicts`` runs it where that happens: a large pair near by the verifier
alone, in the verifier's own frame (as they are, or mirrored), whose geometric step found
next to nothing (fewer than ``geometry_inliers`` inliers, none resting on content). On
``bench.accuracy``'s copies the whole comparison alone would refuse 85 of the 279 large copy
pairs the verifier passes (crops, re-uploads, borders, turns: compared whole they do not line
up), but every one of them has a geometric fit of 12 or more inliers or one resting on
content, so the rule never reaches them; no unrelated large pair there passes the verifier.

Compared whole (``content_check.whole_agreement``), a copy agrees almost everywhere;
where too little agrees and the coarse layouts differ (``ContentAgreement.overlay``), the
verifier's score is kept as evidence (``Pair.refused_verify``) and no longer makes the pair
near. Other rules (a pHash, a geometric fit) are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

from splitaudit.indexer.match.border_trim import without_border
from splitaudit.indexer.match.content_check import whole_agreement
from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.thresholds import Thresholds


def needs_whole_check(p: Pair, th: Thresholds) -> bool:
    """Whether ``p`` is a large pair near by the verifier alone, in a frame the whole
    comparison can take (as they are or mirrored), whose geometric step found next to nothing:
    no fit resting on content and fewer than ``geometry_inliers`` inliers."""
    if p.verify is None or p.min_side is None or p.min_side < th.small_side:
        return False
    if p.orientation not in ("identity", "mirror"):
        return False
    fit = p.geometry
    if fit is not None and (
        fit.inliers >= th.geometry_inliers or (fit.content is not None and not fit.overlay_only)
    ):
        # SIFT found shared structure (a crop, a turn, a re-upload: the whole comparison refuses
        # most of them, bench.accuracy): the verifier's verdict stands, as it did
        return False
    support = None if p.geometry is None else p.geometry.support
    if not th.is_near(p.hamming, p.cosine, p.verify, p.min_side, support, p.shape):
        return False
    return not th.is_near(p.hamming, p.cosine, None, p.min_side, support, p.shape)


def refuse_overlay_verdicts(
    pairs: Sequence[Pair],
    query: Image.Image,
    load: Callable[[int], Image.Image | None],
    th: Thresholds,
) -> int:
    """Refuse the verifier's verdict of the pairs ``needs_whole_check`` picks whose images,
    compared whole, agree only on an overlay; the number refused."""
    picked = [p for p in pairs if needs_whole_check(p, th)]
    if not picked:
        return 0
    gray = without_border(np.asarray(query.convert("L")))
    refused = 0
    for p in picked:
        corpus = load(p.item_id)
        if corpus is None:
            continue
        reference = without_border(np.asarray(corpus.convert("L")))
        agreement = whole_agreement(gray, reference, mirrored=p.mirrored)
        if agreement is not None and agreement.overlay:
            p.refused_verify, p.verify = p.verify, None
            p.whole_agreement = agreement.score
            refused += 1
    return refused
