"""Caption self-join: every pair of corpus items whose captions are exact or near copies of each other.

The corpus is joined with itself through the caption index it already has (near-linear: never
all pairs), under the same rules as a test caption queried against it
(:func:`~splitaudit.indexer.captions.query.find_caption_matches`, docs/captions.md):

1. rows with fewer than ``min_tokens`` content words, and *stock* captions (a normalised caption
   repeated in ``common_fraction`` of the corpus), take no part: boilerplate never pairs items;
2. **exact**: rows with the same normalised-caption hash are grouped; each member is paired with
   the group's first row (a star: union-find needs no more) and only that first row, the
   group's representative, goes on to the near stage;
3. **near**: per LSH band, the representatives sharing a band key (a bucket of at most
   ``MAX_BUCKET``; a larger one is boilerplate-like and nominates nothing, as in a query) are
   paired, and pairs whose signature estimate is below ``jaccard - ESTIMATE_MARGIN`` dropped;
4. every surviving pair is decided on the text: exact words, bigram Jaccard >= ``jaccard`` or
   the containment rule, and at least ``min_informative_shared`` shared bigrams that are not
   common in the corpus.

Memory: the index's signatures of the rows (16 bits x ``num_perm`` per caption), one band's
keys at a time, and the candidate pairs (8 bytes each). Work: per band a sort of the keys plus
``sum(k * (k - 1) / 2)`` over its buckets of ``k`` representatives.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.captions.index import CaptionIndex
from splitaudit.indexer.captions.query import CaptionThresholds
from splitaudit.indexer.captions.text_rule import ParsedCaption, parse_caption, text_match

__all__ = ["ESTIMATE_MARGIN", "MAX_BUCKET", "CaptionPair", "SelfJoin", "caption_self_join"]

# The same candidate rules as a query (captions/query.py): signature estimates within this of
# the threshold go on to the text; a band bucket larger than MAX_BUCKET nominates nothing.
ESTIMATE_MARGIN = 0.12
MAX_BUCKET = 2_000
_PAIR_BLOCK = 1 << 22  # candidate pairs generated at once (32 MiB of int64 pairs)
_ESTIMATE_BLOCK = 1 << 18  # pairs whose signatures are compared at once
_VERIFY_BLOCK = 200_000  # candidate pairs whose captions are fetched and parsed at once

ProgressFn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class CaptionPair:
    """Two corpus items (``a < b``) whose captions are copies; ``exact``: same content words."""

    a: int
    b: int
    exact: bool
    jaccard: float
    containment: float
    contained: bool = False


@dataclass
class SelfJoin:
    """The pairs found and what it took to find them."""

    pairs: list[CaptionPair]
    stats: dict[str, Any] = field(default_factory=dict)


def caption_self_join(
    index: CaptionIndex,
    thresholds: CaptionThresholds | None = None,
    *,
    progress: ProgressFn | None = None,
) -> SelfJoin:
    """Every pair of ``index``'s corpus items whose captions match under ``thresholds``."""
    th = thresholds or CaptionThresholds()
    rules = th.rules
    say = progress or (lambda _m: None)
    t0 = time.perf_counter()
    segments = [s for s in index.segments if len(s)]
    stats: dict[str, Any] = {"captions": sum(len(s) for s in segments)}
    if not segments:
        return SelfJoin([], stats | {"pairs": 0})
    offsets = np.cumsum([0] + [len(s) for s in segments])
    n = int(offsets[-1])
    ids = np.concatenate([np.asarray(s.ids) for s in segments])
    lengths = np.concatenate([np.asarray(s.lengths) for s in segments])
    exact = np.empty(n, np.uint64)
    for s, off in zip(segments, offsets, strict=False):
        exact[off + np.asarray(s.erows, np.int64)] = s.exact

    # Exact groups (eligible rows only); stock captions leave the join altogether.
    eligible = lengths >= rules.min_tokens
    rows = np.flatnonzero(eligible)
    order = rows[np.argsort(exact[rows], kind="stable")]
    values = exact[order]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(order) else order
    sizes = np.diff(np.r_[starts, len(order)])
    stock = sizes >= rules.common_count(index.state.captions)
    group_of = np.repeat(np.arange(len(starts)), sizes)
    leader_pos = starts[group_of]
    follower = (np.arange(len(order)) != leader_pos) & ~stock[group_of]
    exact_pairs = np.stack([order[leader_pos[follower]], order[follower]], axis=1)
    representative = np.zeros(n, bool)
    representative[order[starts[~stock]]] = True
    stats |= {
        "eligible": int(rows.size),
        "stock_captions": int(sizes[stock].sum()),
        "exact_groups": int(np.count_nonzero((sizes > 1) & ~stock)),
    }
    say(f"caption self-join: {n} captions, {int(representative.sum())} distinct eligible")

    # Near candidates through the LSH bands, pruned by the signature estimate.
    sig = (
        np.asarray(segments[0].sig)
        if len(segments) == 1
        else np.concatenate([np.asarray(s.sig) for s in segments])
    )
    min_estimate = th.jaccard - ESTIMATE_MARGIN
    found: list[npt.NDArray[np.int64]] = []
    nominated = skipped = 0
    bands = segments[0].bkeys.shape[0]
    for j in range(bands):
        keys, band_rows = _band(segments, offsets, j)
        keep = representative[band_rows]
        keys, band_rows = keys[keep], band_rows[keep]
        if not len(keys):
            continue
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        size = np.diff(np.r_[first, len(keys)])
        skipped += int(np.count_nonzero(size > MAX_BUCKET))
        use = (size > 1) & (size <= MAX_BUCKET)
        for left, right in _bucket_pairs(first[use], size[use]):
            a, b = band_rows[left], band_rows[right]
            nominated += len(a)
            found.append(_pruned(a, b, sig, min_estimate, n))
        if found and sum(len(f) for f in found) > _PAIR_BLOCK:
            found = [np.unique(np.concatenate(found))]
        say(f"caption self-join: band {j + 1} of {bands}")
    near = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
    near_pairs = np.stack(np.divmod(near, n), axis=1)
    stats |= {
        "band_pairs": nominated,
        "oversized_buckets": skipped,
        "candidates": int(len(near) + len(exact_pairs)),
        "candidate_s": round(time.perf_counter() - t0, 2),
    }

    # Decide on the text.
    t1 = time.perf_counter()
    candidates = np.concatenate([exact_pairs, near_pairs]).astype(np.int64)
    pairs = _verify(index, ids[candidates[:, 0]], ids[candidates[:, 1]], th)
    stats |= {
        "pairs": len(pairs),
        "exact_pairs": sum(1 for p in pairs if p.exact),
        "near_pairs": sum(1 for p in pairs if not p.exact),
        "verify_s": round(time.perf_counter() - t1, 2),
    }
    return SelfJoin(pairs, stats)


def _band(
    segments: list[Any], offsets: npt.NDArray[np.int64], j: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Band ``j``'s keys over every segment, sorted, with their global rows."""
    if len(segments) == 1:
        return np.asarray(segments[0].bkeys[j]), np.asarray(segments[0].brows[j], np.int64)
    keys = np.concatenate([np.asarray(s.bkeys[j]) for s in segments])
    rows = np.concatenate(
        [np.asarray(s.brows[j], np.int64) + off for s, off in zip(segments, offsets, strict=False)]
    )
    order = np.argsort(keys, kind="stable")
    return keys[order], rows[order]


def _bucket_pairs(
    first: npt.NDArray[np.int64], size: npt.NDArray[np.int64]
) -> itertools.chain[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Every within-bucket position pair ``(left, right)``, ``left < right``, in bounded blocks."""
    per_bucket = size * (size - 1) // 2
    cut = np.searchsorted(
        np.cumsum(per_bucket), np.arange(_PAIR_BLOCK, per_bucket.sum() + _PAIR_BLOCK, _PAIR_BLOCK)
    )
    bounds = np.unique(np.r_[0, np.minimum(cut + 1, len(size))])
    return itertools.chain.from_iterable(
        _pairs_of(first[lo:hi], size[lo:hi]) for lo, hi in itertools.pairwise(bounds)
    )


def _pairs_of(
    first: npt.NDArray[np.int64], size: npt.NDArray[np.int64]
) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    if not len(first):
        return []
    pos = np.repeat(first, size) + (
        np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)
    )
    end = np.repeat(first + size, size)
    partners = end - 1 - pos  # positions after this one in its bucket
    total = int(partners.sum())
    left = np.repeat(pos, partners)
    right = left + 1 + (np.arange(total) - np.repeat(np.cumsum(partners) - partners, partners))
    return [(left, right)]


def _pruned(
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    sig: npt.NDArray[np.uint16],
    min_estimate: float,
    n: int,
) -> npt.NDArray[np.int64]:
    """Pairs (encoded ``lo * n + hi``) whose signature estimate reaches ``min_estimate``."""
    out = []
    for lo in range(0, len(a), _ESTIMATE_BLOCK):
        x, y = a[lo : lo + _ESTIMATE_BLOCK], b[lo : lo + _ESTIMATE_BLOCK]
        est = (sig[x] == sig[y]).mean(axis=1, dtype=np.float32)
        keep = est >= min_estimate
        x, y = x[keep], y[keep]
        out.append(np.minimum(x, y) * n + np.maximum(x, y))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _verify(
    index: CaptionIndex,
    a_ids: npt.NDArray[np.int64],
    b_ids: npt.NDArray[np.int64],
    th: CaptionThresholds,
) -> list[CaptionPair]:
    """The candidate item pairs that match on their text (``text_rule.text_match``)."""
    out: dict[tuple[int, int], CaptionPair] = {}
    lo_ids, hi_ids = np.minimum(a_ids, b_ids), np.maximum(a_ids, b_ids)
    order = np.lexsort((hi_ids, lo_ids))
    lo_ids, hi_ids = lo_ids[order], hi_ids[order]
    # A block of pairs at a time: only its captions' text and parsed words are held.
    for start in range(0, len(order), _VERIFY_BLOCK):
        block_lo = lo_ids[start : start + _VERIFY_BLOCK]
        block_hi = hi_ids[start : start + _VERIFY_BLOCK]
        _verify_block(index, block_lo, block_hi, th, out)
    return sorted(out.values(), key=lambda p: (p.a, p.b))


def _verify_block(
    index: CaptionIndex,
    lo_ids: npt.NDArray[np.int64],
    hi_ids: npt.NDArray[np.int64],
    th: CaptionThresholds,
    out: dict[tuple[int, int], CaptionPair],
) -> None:
    rules = th.rules
    frequency = index.frequency
    common = rules.common_count(frequency.captions)
    texts = index.texts(np.unique(np.r_[lo_ids, hi_ids]).tolist())
    parsed: dict[int, ParsedCaption] = {}
    for lo, hi in zip(lo_ids.tolist(), hi_ids.tolist(), strict=True):
        if lo == hi or (lo, hi) in out or lo not in texts or hi not in texts:
            continue  # an item gone from the corpus since indexing has no text
        a = parsed.get(lo) or parsed.setdefault(lo, parse_caption(texts[lo]))
        b = parsed.get(hi) or parsed.setdefault(hi, parse_caption(texts[hi]))
        found = text_match(a, b, th, frequency, common)
        if found is None:
            continue
        out[(lo, hi)] = CaptionPair(
            a=lo,
            b=hi,
            exact=found.exact,
            jaccard=found.jaccard,
            containment=found.containment,
            contained=found.contained,
        )
