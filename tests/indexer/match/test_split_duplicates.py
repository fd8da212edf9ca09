"""Within-split duplicates: verified per row on thumbnails prepared once, the same pairs as pair by pair."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from splitaudit.indexer.demo import synthetic_photo
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.match.engine import split_duplicates
from splitaudit.indexer.match.pair import Pair, classify_all
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.thresholds import thresholds_for_model
from splitaudit.indexer.match.verify import verify_score, verify_thumbnail


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def _state(images: list[Image.Image]) -> SplitState:
    features = [extract_features(_png(im), keep_image=True) for im in images]
    return SplitState(
        ids=np.arange(len(images), dtype=np.int64),
        keys=[f"{i}.png" for i in range(len(images))],
        labels=[None] * len(images),
        sha256=[f.sha256 for f, _ in features],
        pixel=[f.pixel_digest for f, _ in features],
        stream=[f.stream_digest for f, _ in features],
        phash=np.asarray([f.phash for f, _ in features], np.uint64),
        phash_mirror=np.asarray([f.phash_mirror for f, _ in features], np.uint64),
        min_side=np.asarray([min(f.width, f.height) for f, _ in features], np.int32),
        thumbs=np.stack([verify_thumbnail(im) for _, im in features if im is not None]),
    )


def test_split_duplicates_match_one_verification_per_pair() -> None:
    base = [synthetic_photo(seed, (48, 48)) for seed in range(6)]
    shifted = [
        Image.fromarray(np.roll(np.asarray(im), shift, axis=1))
        for im, shift in zip(base[:3], (1, 2, 3), strict=True)
    ]
    small = [im.resize((40, 40), Image.Resampling.BILINEAR) for im in base[3:5]]
    state = _state(base + shifted + small)
    th = thresholds_for_model(None)
    found = {(d.a, d.b): d.kind for d in split_duplicates(state, None, th)}

    # The oracle: every pair the batched code verifies, scored alone with ``verify_score``.
    expected: dict[tuple[int, int], str] = {}
    n = len(state)
    for i in range(n):
        for j in range(i + 1, n):
            p = Pair(row=i, item_id=j)
            d = int(bin(int(state.phash[i]) ^ int(state.phash[j])).count("1"))
            dm = min(
                int(bin(int(state.phash_mirror[i]) ^ int(state.phash[j])).count("1")),
                int(bin(int(state.phash_mirror[j]) ^ int(state.phash[i])).count("1")),
            )
            best = min(d, dm)
            if best > th.candidate_hamming:
                continue
            p.hamming, p.mirrored = best, dm < d
            p.min_side = int(min(state.min_side[i], state.min_side[j]))
            if th.needs_verify(p.hamming, p.cosine, p.min_side):
                p.verify = verify_score(state.thumbs[i], state.thumbs[j])
            classify_all([p], th)
            if p.kind is not None:
                expected[(i, j)] = p.kind
    assert {(0, 6), (1, 7), (2, 8)} <= set(found)  # the shifted copies are found
    assert found == expected
