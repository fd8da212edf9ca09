"""Small pairs (low-resolution images): turned by the closest oriented pHash before
verification, aligned densely after it (``low_res_align``), and the orientation verification
settles on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt
from PIL import Image
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Item
from splitaudit.indexer.features.perceptual import Orientation
from splitaudit.indexer.match.pair import Pair, near_all
from splitaudit.indexer.match.pair_search import column_by_id
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import Thresholds


def turn_small_pairs(
    session: Session, state: SplitState, pairs: Iterable[Pair], th: Thresholds
) -> None:
    """Small candidate pairs the hash tier did not find turned: the orientation whose pHash of
    the test image comes closest to the corpus image's, so the verifier tries the test image
    turned back that way (a turned thumbnail nominated by its cosine or its plain pHash: a
    brick wall turned 180 degrees is 14 bits from its source that way, 34 upright). The hash
    tier looks for turned copies within the near radius only (``hash_pairs``); this adds no
    candidate, it only orients the ones there are. Pairs only the wider search of a small test
    image nominated (``Pair.wide_only``: ranks ``TOP_K`` to ``SMALL_TOP_K`` by cosine, for
    re-scraped copies) are left upright: turned there, a tile of one scene verified at 0.70-0.83
    against three unrelated wallpaper tiles among 12,000 (``bench.recall --distractors``)."""
    if state.phash_oriented is None or len(state.phash_oriented) != len(state):
        return
    todo = [
        p
        for p in pairs
        if p.orientation in ("identity", "mirror")
        and not p.wide_only
        and (p.hamming is None or p.hamming > th.phash_hamming)
        and p.min_side is not None
        and bool(th.small_mask(float(p.min_side)))
        and not p.digest_equal
    ]
    if not todo:
        return
    from splitaudit.indexer.match.orientation import closest_turn

    hashes = column_by_id(session, Item.phash, sorted({p.item_id for p in todo}))
    for p in todo:
        if p.item_id in hashes:
            turn = closest_turn(state.phash_oriented[p.row], int(hashes[p.item_id]), p.hamming)
            if turn is not None:
                p.hamming, p.orientation = turn


def align_small_pairs(
    query: Image.Image,
    kept: Sequence[Pair],
    thumbs: Sequence[npt.NDArray[np.uint8]],
    th: Thresholds,
    phases: PhaseTimes,
    both_ways: bool = True,
) -> None:
    """Dense low-resolution alignment (``splitaudit.indexer.match.low_res_align``) of small pairs:
    a pair the verifier left open, upright or mirrored, that aligns at ``ALIGNED_NEAR`` or
    better keeps that score as its verification score and the orientation it aligned in (a
    re-scraped thumbnail shifted and zoomed). Both orientations are tried, as the verifier tries
    them: a candidate's orientation beyond the near radius is only its nearer candidate hash's
    (a zoomed 48-px dog tile's mirrored pHash was 20 bits off, its plain one 28: labelled
    mirrored, never aligned upright, where it aligns at 0.98); a pair near by
    a marginal verifier score alone (under ``CONFIRM_BELOW``) must align at ``CONFIRM_FLOOR``
    too, or its score becomes the alignment's (a periodic texture's neighbouring tile: the
    verifier does not weigh the texture's own repeats) — unless, where the test image is small
    itself, the corpus thumbnail aligned onto it reaches ``ALIGNED_NEAR``, as a pair the
    verifier left open would be found (a zoomed-in 48-px astronaut tile: verifier 0.795,
    aligned 0.555 one way, 0.966 the other).

    ``both_ways``: where the test image is small itself, a pair its alignment leaves between
    ``ALIGNED_BACK_FROM`` and ``ALIGNED_NEAR`` is aligned the other way too, the corpus
    thumbnail onto the test image's (``_align_back``); a dedup, which asks every pair from
    both of its sides, turns it off. A large test image is not: its own pyramid is sharp, the
    corpus thumbnail's is not, and a 384-px cell image (a disc on grey) aligned with a 48-px
    tile of a dark suit at 0.76 that way round (``bench.recall --seed 1 --distractors
    12000``)."""
    from splitaudit.indexer.match.low_res_align import (
        CONFIRM_FLOOR,
        MAX_SIDE,
        AlignJob,
        aligned_scores_together,
        needs_confirmation,
        prepare_query,
    )
    from splitaudit.indexer.match.verify import sparse_weight

    near = near_all(kept, th)
    small = [i for i, p in enumerate(kept) if p.min_side is not None and p.min_side <= MAX_SIDE]
    rows = [i for i in small if kept[i].orientation in ("identity", "mirror") and not near[i]]
    confirm = [
        i
        for i in small
        if needs_confirmation(
            kept[i].verify, kept[i].hamming, kept[i].min_side, kept[i].orientation, near[i], th
        )
    ]
    if not rows and not confirm:
        return
    with phases.phase("verification: low-res alignment"):
        prepared = prepare_query(query)
        mirror = prepare_query(query.transpose(Image.Transpose.FLIP_LEFT_RIGHT))
        # the verifier's weight on sparse thumbnails (one dot on a plain ground), on the
        # alignment's scores too: a dot on blue aligned with a star field at 0.86 among 12,000
        # distractor thumbnails (bench.recall --distractors): weighed 0.28, 0.24
        own = float(sparse_weight([query])[0])
        # every alignment of this test image in one call: their Nelder-Mead searches run
        # side by side (``aligned_scores_together``)
        aligned = np.stack([thumbs[i] for i in rows]) if rows else None
        # Exact scores down to CONFIRM_FLOOR; the verifier also matches the query mirrored:
        # so does the confirmation.
        confirming = np.stack([thumbs[i] for i in confirm]) if confirm else None
        jobs: list[AlignJob] = []
        if aligned is not None:
            jobs += [(prepared, aligned, None), (mirror, aligned, None)]
        if confirming is not None:
            jobs += [(prepared, confirming, CONFIRM_FLOOR), (mirror, confirming, CONFIRM_FLOOR)]
        scores = aligned_scores_together(jobs)
        upright = mirrored = confirmed = np.zeros(0, np.float32)
        back_up, back_flipped = np.full((2, len(confirm)), -1.0, np.float32)
        small_query = both_ways and min(query.size) <= MAX_SIDE
        if aligned is not None:
            weight = np.minimum(own, sparse_weight(aligned))
            upright, mirrored = scores[0] * weight, scores[1] * weight
            if small_query:
                _align_back(query, aligned, upright, mirrored, weight)
        if confirming is not None:
            weight = np.minimum(own, sparse_weight(confirming))
            confirmed = np.maximum(scores[-2], scores[-1]) * weight
            if small_query:  # the pairs the test image's own alignment does not confirm
                open_rows = np.flatnonzero(confirmed < CONFIRM_FLOOR)
                other_way = _back_scores(query, confirming[open_rows])
                back_up[open_rows] = other_way[0] * weight[open_rows]
                back_flipped[open_rows] = other_way[1] * weight[open_rows]
    for i, up, flipped in zip(rows, upright.tolist(), mirrored.tolist(), strict=True):
        _take_alignment(kept[i], up, flipped)
    for i, score, up, flipped in zip(
        confirm, confirmed.tolist(), back_up.tolist(), back_flipped.tolist(), strict=True
    ):
        p = kept[i]
        if score < CONFIRM_FLOOR and not _take_alignment(p, up, flipped):
            p.unconfirmed_verify, p.verify = p.verify, float(score)


def _take_alignment(p: Pair, upright: float, mirrored: float) -> bool:
    """Whether the pair aligns at ``ALIGNED_NEAR`` (upright or mirrored); where that beats its
    verification score, the pair takes the score and the orientation it aligned in."""
    from splitaudit.indexer.match.low_res_align import ALIGNED_NEAR

    score = max(upright, mirrored)
    if score < ALIGNED_NEAR:
        return False
    if score > (p.verify if p.verify is not None else -1.0):
        p.verify = float(score)
        p.orientation = "mirror" if mirrored > upright else "identity"
    return True


def _align_back(
    query: Image.Image,
    aligned: npt.NDArray[np.uint8],
    upright: npt.NDArray[np.float32],
    mirrored: npt.NDArray[np.float32],
    weight: npt.NDArray[np.float32],
) -> None:
    """The alignment the other way round, for the pairs the test image's own alignment left
    between ``ALIGNED_BACK_FROM`` and ``ALIGNED_NEAR``: each corpus thumbnail aligned onto the
    test image's (upright and mirrored), the better of the two ways kept, in place. The
    alignment is directional: the coarse step matches the reference's central window, and a
    copy zoomed out past a feature near its edge keeps more of the corpus image than the
    corpus image keeps of it (a zoomed-out cloud tile: 0.75 one way, 0.95 the other)."""
    from splitaudit.indexer.match.low_res_align import ALIGNED_BACK_FROM, ALIGNED_NEAR

    forward = np.maximum(upright, mirrored)
    back = np.flatnonzero((forward >= ALIGNED_BACK_FROM) & (forward < ALIGNED_NEAR))
    if not len(back):
        return
    other_way = _back_scores(query, aligned[back])
    upright[back] = np.maximum(upright[back], other_way[0] * weight[back])
    mirrored[back] = np.maximum(mirrored[back], other_way[1] * weight[back])


def _back_scores(
    query: Image.Image, thumbs: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Each corpus thumbnail of ``thumbs`` aligned onto the test image's, upright and
    mirrored: ``(upright, mirrored)`` scores (unweighted)."""
    from splitaudit.indexer.match.low_res_align import (
        AlignJob,
        aligned_scores_together,
        prepare_query,
    )
    from splitaudit.indexer.match.verify import verify_thumbnail

    if not len(thumbs):
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    own = verify_thumbnail(query)
    # the test image mirrored as reference: the corpus thumbnail onto it is the mirrored pair
    references = np.stack([own, np.fliplr(own)])
    jobs: list[AlignJob] = [(prepare_query(t), references, None) for t in thumbs]
    scores = np.stack(aligned_scores_together(jobs))
    return scores[:, 0].astype(np.float32), scores[:, 1].astype(np.float32)


def confirm_turned_hashes(kept: Iterable[Pair], th: Thresholds) -> None:
    """A small pair within the near radius of the pHash only in a *turned* orientation (a
    quarter turn, a vertical flip, a transpose: six of the eight the hash tier searches) is not
    near by that hash unless the verifier scores it at ``verify_score``; upright or mirrored,
    ``small_phash_verify`` is enough as before. A single blob on a plain ground is within 8 bits
    of any other in some orientation: a 384-px cell image (one bright disc on grey) turned
    matched a 64-px wallpaper tile (an orange disc on purple) transposed at 8 bits, verifier
    0.40, among 12,000 distractor thumbnails (``bench.recall --distractors``), every one of its
    seven turns; turned copies verify at 0.9-1.0 in their orientation. The distance stays in
    the evidence (``unconfirmed_turned_phash``)."""
    for p in kept:
        if (
            p.hamming is not None
            and p.hamming <= th.phash_hamming
            and p.orientation not in ("identity", "mirror")
            and p.min_side is not None
            and bool(th.small_mask(float(p.min_side)))
            and (p.verify is None or p.verify < th.verify_score)
            and not p.digest_equal
        ):
            p.unconfirmed_turned_hamming, p.hamming = p.hamming, None


def verified_orientation(p: Pair, found: Orientation, th: Thresholds) -> None:
    """The pair's orientation after verification: the pHash's where it is within the near radius
    (hash and orientation are one piece of evidence), else the one the verifier aligned in."""
    if p.hamming is None or p.hamming > th.phash_hamming:
        p.orientation = found
