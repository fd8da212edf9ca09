"""The one text rule of the caption tier: when two parsed captions are copies (audit and dedup).

Exact after normalisation, or word-pair Jaccard at least ``jaccard``, or (long enough captions)
nearly all of the shorter caption's word pairs in the longer one; and never on boilerplate alone:
at least ``min_informative_shared`` of the shared word pairs must be uncommon in the corpus.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from splitaudit.indexer.captions.normalize import content_tokens, shingle_hashes_of

if TYPE_CHECKING:
    from splitaudit.indexer.captions.boilerplate import BoilerplateRules, ShingleFrequency


class CopyRule(Protocol):
    """The thresholds the text rule reads (``query.CaptionThresholds`` is one)."""

    @property
    def jaccard(self) -> float: ...
    @property
    def containment(self) -> float: ...
    @property
    def containment_min_tokens(self) -> int: ...
    @property
    def rules(self) -> BoilerplateRules: ...


@dataclass(frozen=True, slots=True)
class ParsedCaption:
    """A caption's content words and its word-pair shingles."""

    words: list[str]
    shingles: frozenset[tuple[str, str]]


def parse_caption(text: str) -> ParsedCaption:
    """The content words and word pairs of ``text`` (normalised)."""
    words = content_tokens(text)
    return ParsedCaption(words, frozenset(itertools.pairwise(words)))


@dataclass(frozen=True, slots=True)
class TextMatch:
    """Why two captions are copies: exact, Jaccard, containment of the shorter one."""

    exact: bool
    jaccard: float
    containment: float
    contained: bool


def text_match(
    a: ParsedCaption,
    b: ParsedCaption,
    th: CopyRule,
    frequency: ShingleFrequency,
    common: int,
) -> TextMatch | None:
    """The match of ``a`` and ``b`` under ``th``, or ``None`` (too short, too different, or only
    word pairs at least ``common`` corpus captions share)."""
    rules = th.rules
    if min(len(a.words), len(b.words)) < rules.min_tokens:
        return None
    shared = a.shingles & b.shingles
    jaccard = len(shared) / len(a.shingles | b.shingles)
    exact = a.words == b.words
    smaller = min(len(a.shingles), len(b.shingles))
    contained = (
        min(len(a.words), len(b.words)) >= th.containment_min_tokens
        and len(shared) >= th.containment * smaller
    )
    if not exact and jaccard < th.jaccard and not contained:
        return None
    # Only now (few pairs get here) look up how common the shared shingles are.
    informative = frequency.frequency(shingle_hashes_of(shared)) < common
    if int(np.count_nonzero(informative)) < rules.min_informative_shared:
        return None  # only common shingles in common: boilerplate never matches on its own
    return TextMatch(
        exact=exact,
        jaccard=1.0 if exact else jaccard,
        containment=len(shared) / max(1, smaller),
        contained=contained,
    )
