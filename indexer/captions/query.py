"""Querying a caption index: exact-after-normalisation and near-copy captions, verified on the text.

For a batch of test captions: exact hashes are looked up in every segment; LSH bands nominate
near candidates, the stored signatures prune them (estimated Jaccard), and the survivors are
checked on the corpus text itself: Jaccard of the word-bigram sets, the informative (non-common)
shingles they share, and the longest shared word run, which is the evidence a reviewer reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.captions.boilerplate import BoilerplateRules
from splitaudit.indexer.captions.index import CaptionIndex, Segment
from splitaudit.indexer.captions.minhash import (
    band_keys,
    estimate_jaccard,
    longest_shared_span,
    signatures,
)
from splitaudit.indexer.captions.normalize import token_batch
from splitaudit.indexer.captions.text_rule import ParsedCaption, parse_caption, text_match
from splitaudit.indexer.errors import UsageError

__all__ = [
    "DEFAULT_JACCARD",
    "CaptionHit",
    "CaptionThresholds",
    "find_caption_matches",
    "split_caption_thresholds",
]

# Measured by bench/captions.py (docs/captions.md): the lowest word-bigram Jaccard at which
# unrelated captions drawn from the same templates stop matching at 1M corpus captions.
DEFAULT_JACCARD = 0.6
DEFAULT_CONTAINMENT = 0.9
DEFAULT_CONTAINMENT_MIN_TOKENS = 8
# Signature estimates have a standard deviation of ~0.045 at 128 slots near the threshold.
_ESTIMATE_MARGIN = 0.12
# A band bucket holding more corpus captions than this is boilerplate-like (many near-identical
# captions); it nominates nothing (exact copies are still found through the exact hashes).
_MAX_BUCKET = 2_000
_QUERY_BLOCK = 2_048
_CANDIDATES_PER_CAPTION = 64
PREFIX = "caption_"  # caption thresholds in an audit's thresholds JSON: caption_jaccard, ...


@dataclass(frozen=True, slots=True)
class CaptionThresholds:
    """When a corpus caption counts as a copy of a test caption."""

    jaccard: float = DEFAULT_JACCARD
    # A truncated copy: nearly all of the shorter caption's shingles are in the longer one, and
    # the shorter one is long enough for that to be telling (short ones fit in many captions).
    containment: float = DEFAULT_CONTAINMENT
    containment_min_tokens: int = DEFAULT_CONTAINMENT_MIN_TOKENS
    max_hits: int = 5  # per test caption, best first
    rules: BoilerplateRules = field(default_factory=BoilerplateRules)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the report's thresholds), keys as :meth:`from_mapping` reads them."""
        plain = {
            "jaccard": self.jaccard,
            "containment": self.containment,
            "containment_min_tokens": self.containment_min_tokens,
            "max_hits": self.max_hits,
            **self.rules.to_dict(),
        }
        return {f"{PREFIX}{k}": v for k, v in plain.items()}

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> CaptionThresholds:
        """Caption thresholds from user input: the ``caption_*`` keys of ``mapping`` override the
        defaults (other keys are ignored); ``UsageError`` for an unknown key or a bad value."""
        given = {k[len(PREFIX) :]: v for k, v in mapping.items() if str(k).startswith(PREFIX)}
        own = {f.name for f in fields(cls)} - {"rules"}
        rule_names = {f.name for f in fields(BoilerplateRules)}
        unknown = sorted(set(given) - own - rule_names)
        if unknown:
            valid = ", ".join(sorted(PREFIX + n for n in own | rule_names))
            raise UsageError(
                f"unknown caption threshold(s) {', '.join(PREFIX + u for u in unknown)}; valid: {valid}"
            )
        for name, value in given.items():
            fraction = name in {"jaccard", "containment", "common_fraction"}
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and (0 < value <= 1 if fraction else float(value).is_integer() and value >= 0)
            if not ok:
                want = "a number in (0, 1]" if fraction else "a whole number >= 0"
                raise UsageError(f"caption threshold {PREFIX}{name} must be {want}, got {value!r}")
        rules = replace(BoilerplateRules(), **_typed(given, rule_names))
        return replace(cls(rules=rules), **_typed(given, own))


def _typed(given: Mapping[str, Any], names: set[str]) -> dict[str, Any]:
    """The ``names`` among ``given``, fractions as float and counts as int."""
    floats = {"jaccard", "containment", "common_fraction"}
    return {k: float(v) if k in floats else int(v) for k, v in given.items() if k in names}


def split_caption_thresholds(
    mapping: Mapping[str, Any],
) -> tuple[dict[str, Any], CaptionThresholds]:
    """An audit's thresholds split into the other tiers' keys and the ``caption_*`` ones."""
    rest = {k: v for k, v in mapping.items() if not str(k).startswith(PREFIX)}
    return rest, CaptionThresholds.from_mapping(mapping)


@dataclass(frozen=True, slots=True)
class CaptionHit:
    """A corpus caption matching a test caption; ``test_id`` is the caller's id for the caption."""

    test_id: int
    item_id: int
    kind: str  # "exact" | "near"
    jaccard: float
    shared_span: str
    test_caption: str
    corpus_caption: str
    containment: float = 0.0
    contained: bool = False  # matched (also) by the containment rule (a truncated copy)

    def evidence(self) -> dict[str, Any]:
        """The match evidence stored with a ``caption`` match."""
        return {
            "jaccard": round(self.jaccard, 4),
            "containment": round(self.containment, 4),
            "shared_span": self.shared_span,
            "test_caption": self.test_caption,
            "corpus_caption": self.corpus_caption,
            "exact": self.kind == "exact",
        }


def find_caption_matches(
    index: CaptionIndex,
    captions: Sequence[tuple[int, str]],
    *,
    thresholds: CaptionThresholds | None = None,
) -> list[CaptionHit]:
    """Corpus captions that are exact or near copies of ``captions`` (``(test_id, text)`` pairs).

    Several captions may share a ``test_id`` (an image with five captions); each ``(test_id,
    item_id)`` pair is reported once, with its strongest evidence, at most ``max_hits`` per id.
    """
    th = thresholds or CaptionThresholds()
    rules = th.rules
    if not captions or not index.segments:
        return []
    texts = [text for _, text in captions]
    batch = token_batch(texts)
    keys, owner = batch.shingles()
    sig32 = signatures(keys, owner, len(batch), index.params)
    qsig = (sig32 & np.uint32(0xFFFF)).astype(np.uint16)
    qbands = band_keys(sig32, index.params)
    eligible = np.flatnonzero(batch.lengths >= rules.min_tokens)
    common_caption = rules.common_count(index.state.captions)

    pairs: set[tuple[int, int]] = set()  # (caption row, corpus item id)
    exact_counts = np.zeros(len(batch), np.int64)
    exact_pairs: list[tuple[int, int]] = []
    for seg in index.segments:
        q = batch.exact[eligible]
        lo = np.searchsorted(seg.exact, q, "left")
        hi = np.searchsorted(seg.exact, q, "right")
        exact_counts[eligible] += hi - lo
        counts = np.minimum(hi - lo, th.max_hits)
        total = int(counts.sum())
        if total:
            first = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
            item_ids = np.asarray(seg.ids)[np.asarray(seg.erows)[first]]
            exact_pairs.extend(
                zip(np.repeat(eligible, counts).tolist(), item_ids.tolist(), strict=True)
            )
    stock = exact_counts >= common_caption  # a caption repeated all over the corpus: boilerplate
    pairs.update((r, i) for r, i in exact_pairs if not stock[r])
    near_rows = eligible[~stock[eligible]]
    for seg in index.segments:
        for start in range(0, len(near_rows), _QUERY_BLOCK):
            rows = near_rows[start : start + _QUERY_BLOCK]
            pairs.update(_candidates(seg, rows, qbands, qsig, th.jaccard - _ESTIMATE_MARGIN))
    if not pairs:
        return []
    return _verify(index, captions, pairs, th)


def _candidates(
    seg: Segment,
    rows: npt.NDArray[np.int64],
    qbands: npt.NDArray[np.uint32],
    qsig: npt.NDArray[np.uint16],
    min_estimate: float,
) -> list[tuple[int, int]]:
    """(query row, corpus item id) pairs sharing a band and estimated at ``min_estimate`` or above."""
    found_q: list[npt.NDArray[np.int64]] = []
    found_r: list[npt.NDArray[np.int64]] = []
    for j in range(seg.bkeys.shape[0]):
        keys_j = seg.bkeys[j]
        qk = qbands[rows, j]
        lo = np.searchsorted(keys_j, qk, "left")
        hi = np.searchsorted(keys_j, qk, "right")
        counts = hi - lo
        counts[counts > _MAX_BUCKET] = 0
        total = int(counts.sum())
        if not total:
            continue
        q_of = np.repeat(rows, counts)
        first = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
        found_q.append(q_of)
        found_r.append(np.asarray(seg.brows[j][first], np.int64))
    if not found_q:
        return []
    # Distinct pairs, ordered by segment row (memory-mapped signatures read in file order); a
    # sort is several times faster than np.unique's hash table on these sizes.
    combined = np.concatenate(found_r) * (int(rows.max()) + 1) + np.concatenate(found_q)
    combined.sort()
    combined = combined[np.r_[True, combined[1:] != combined[:-1]]]
    r_all, q_all = np.divmod(combined, int(rows.max()) + 1)
    est = estimate_jaccard(qsig[q_all], np.asarray(seg.sig[r_all]))
    keep = est >= min_estimate
    q_all, r_all, est = q_all[keep], r_all[keep], est[keep]
    # Per query row, the best-estimated candidates only (bounded work per caption).
    order = np.lexsort((-est, q_all))
    q_all, r_all = q_all[order], r_all[order]
    rank = np.arange(len(q_all)) - np.searchsorted(q_all, q_all, "left")
    keep = rank < _CANDIDATES_PER_CAPTION
    r_kept = r_all[keep]
    items = np.asarray(seg.ids[np.sort(r_kept)])[np.argsort(np.argsort(r_kept))]
    return list(zip(q_all[keep].tolist(), items.tolist(), strict=True))


def _verify(
    index: CaptionIndex,
    captions: Sequence[tuple[int, str]],
    pairs: set[tuple[int, int]],
    th: CaptionThresholds,
) -> list[CaptionHit]:
    """Check candidate pairs on the text; the best ``max_hits`` per test id."""
    frequency, rules = index.frequency, th.rules
    common = rules.common_count(frequency.captions)
    corpus_text = index.texts(sorted({item for _, item in pairs}))
    tests: dict[int, ParsedCaption] = {}
    corpus: dict[int, ParsedCaption] = {}
    best: dict[tuple[int, int], CaptionHit] = {}
    for row, item_id in sorted(pairs):
        corpus_caption = corpus_text.get(item_id)
        if corpus_caption is None:  # the item is gone from the corpus since indexing
            continue
        test_id, test_caption = captions[row]
        a = tests.get(row) or tests.setdefault(row, parse_caption(test_caption))
        b = corpus.get(item_id) or corpus.setdefault(item_id, parse_caption(corpus_caption))
        found = text_match(a, b, th, frequency, common)
        if found is None:
            continue
        start, _, size = longest_shared_span(a.words, b.words)
        hit = CaptionHit(
            test_id=test_id,
            item_id=item_id,
            kind="exact" if found.exact else "near",
            jaccard=found.jaccard,
            shared_span=" ".join(a.words[start : start + size]),
            test_caption=test_caption,
            corpus_caption=corpus_caption,
            containment=found.containment,
            contained=found.contained,
        )
        key = (test_id, item_id)
        old = best.get(key)
        if old is None or _strength(hit) > _strength(old):
            best[key] = hit
    by_test: dict[int, list[CaptionHit]] = {}
    for hit in best.values():
        by_test.setdefault(hit.test_id, []).append(hit)
    out: list[CaptionHit] = []
    for test_id in sorted(by_test):
        hits = sorted(by_test[test_id], key=_strength, reverse=True)
        out.extend(hits[: th.max_hits])
    return out


def _strength(hit: CaptionHit) -> tuple[bool, float, int]:
    return (hit.kind == "exact", hit.jaccard, -hit.item_id)
