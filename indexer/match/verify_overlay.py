"""A pixel verifier's verdict resting on a shared overlay, refused.

The verifier (``verify``) compares two 32-px thumbnails, band-passed. Two different photos
under one window chrome, frame or set of caption bands share most of that thumbnail's
structure: their score can pass ``verify_score`` though nothing of the photos agrees
(``bench.inset_regions``, seed 1: an unrelated photo shown in a screenshot's window, verify
0.742 and 0.744 against two corpus photos under the same chrome, near by that rule alone).
On a large pair the geometric step then finds no fit to check (3 scattered inliers), so the
content check that refuses fits on overlays (``content_check``) never ran.

``refuse_overlay_verdicts`` runs it where that happens: a large pair near by the verifier
alone, in the verifier's own frame (as they are, or mirrored), with no fit resting on
content (a few scattered inliers, or a fit the content check refused). Compared whole (``content_check.whole_agreement``), a copy agrees almost everywhere;
where too little agrees and the coarse layouts differ (``ContentAgreement.overlay``), the
verifier's score is kept as evidence (``Pair.refused_verify``) and no longer makes the pair
near. Other rules (a pHash, a geometric fit) are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

from splitaudit.indexer.match.content_check import whole_agreement
from splitaudit.indexer.match.pair import Pair
from splitaudit.indexer.match.thresholds import Thresholds


def needs_whole_check(p: Pair, th: Thresholds) -> bool:
    """Whether ``p`` is a large pair near by the verifier alone, in a frame the whole
    comparison can take (as they are or mirrored), with no geometric fit resting on content (none
    checked, or one the content check refused)."""
    if p.verify is None or p.min_side is None or p.min_side < th.small_side:
        return False
    if p.orientation not in ("identity", "mirror"):
        return False
    if p.geometry is not None and p.geometry.content is not None and not p.geometry.overlay_only:
        return False  # a fit whose aligned images agree: some content is shared (a crop?)
    support = None if p.geometry is None else p.geometry.support
    if not th.is_near(p.hamming, p.cosine, p.verify, p.min_side, support):
        return False
    return not th.is_near(p.hamming, p.cosine, None, p.min_side, support)


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
    gray = np.asarray(query.convert("L"))
    refused = 0
    for p in picked:
        corpus = load(p.item_id)
        if corpus is None:
            continue
        agreement = whole_agreement(gray, np.asarray(corpus.convert("L")), mirrored=p.mirrored)
        if agreement is not None and agreement.overlay:
            p.refused_verify, p.verify = p.verify, None
            p.whole_agreement = agreement.score
            refused += 1
    return refused
