"""Whole-word, multi-word label matching with one Aho-Corasick automaton per audit.

Terms and text go through the same tokenizer (:mod:`splitaudit.indexer.labels.normalize`). The text's
token keys are joined as ``" k1 k2 k3 "`` and every term is stored as ``" t1 t2 "``: since a
key never contains a space, a pattern can only match a whole run of consecutive tokens, so
``cat`` never matches inside ``category``/``concatenate``/``catalog`` and ``ram`` never inside
``program``; ``tabby_cat_0012``, ``TabbyCat`` and ``tabby-cats`` all read ``tabby cat``.
Phrases match across any separator, including punctuation (``"tabby, cat"``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ahocorasick

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.labels.normalize import (
    DEFAULT_STOPLIST,
    normalize_stoplist,
    term_key,
    token_keys,
    token_spans,
    tokenize,
)

__all__ = ["LabelHit", "LabelMatcher"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LabelHit:
    """A label term found in a text: ``text[start:end]`` is the matched original text."""

    label: str
    term: str
    start: int
    end: int


class LabelMatcher:
    """Finds label terms in texts; build once per audit, then call :meth:`find` per text.

    ``terms`` maps each label to the terms that name it (see
    :func:`splitaudit.indexer.labels.names.label_terms`, which adds the id and drops numeric ids).
    ``stoplist`` (default :data:`~splitaudit.indexer.labels.normalize.DEFAULT_STOPLIST`; pass ``()``
    for none) lists words never matched as a whole term: a term made only of stop words is
    skipped (see :attr:`skipped_terms`); a phrase that merely contains one (``man of war``)
    is kept. ``plurals=False`` turns singular/plural folding off.
    """

    def __init__(
        self,
        terms: Mapping[str, Sequence[str]],
        *,
        stoplist: Iterable[str] | None = None,
        plurals: bool = True,
    ) -> None:
        self._plurals = plurals
        stop = normalize_stoplist(
            DEFAULT_STOPLIST if stoplist is None else stoplist, plurals=plurals
        )
        by_key: dict[str, list[tuple[str, str]]] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self._skipped: dict[str, tuple[str, ...]] = {}
        for label, label_terms in terms.items():
            if isinstance(label_terms, str):
                raise UsageError(
                    f"terms for label {label!r} must be a list of strings, not the string "
                    f"{label_terms!r}"
                )
            used: list[str] = []
            skipped: list[str] = []
            for term in label_terms:
                key = term_key(term, plurals=plurals)
                if not key or key in stop or all(tok in stop for tok in key.split(" ")):
                    skipped.append(term)
                    continue
                bucket = by_key.setdefault(key, [])
                if all(lab != label for lab, _ in bucket):
                    bucket.append((label, term))
                used.append(term)
            self._terms[label] = tuple(used)
            if skipped:
                self._skipped[label] = tuple(skipped)
        if self._skipped:
            log.info(
                "skipped %d stop-list or empty label terms", sum(map(len, self._skipped.values()))
            )
        self._automaton: Any = None
        if by_key:
            automaton = ahocorasick.Automaton()
            for key, bucket in by_key.items():
                automaton.add_word(f" {key} ", (key.count(" ") + 1, tuple(bucket)))
            automaton.make_automaton()
            self._automaton = automaton

    @property
    def labels(self) -> tuple[str, ...]:
        """Every label the matcher was built with (including those with no usable term)."""
        return tuple(self._terms)

    @property
    def skipped_terms(self) -> dict[str, tuple[str, ...]]:
        """Per label, the terms not matched (only stop words, or no letters/digits at all)."""
        return dict(self._skipped)

    def terms(self, label: str) -> tuple[str, ...]:
        """The terms actually matched for ``label``."""
        return self._terms_of(label)

    def _terms_of(self, label: str) -> tuple[str, ...]:
        try:
            return self._terms[label]
        except KeyError:
            raise UsageError(
                f"label {label!r} is not known to this matcher; build the matcher with every "
                "label of the split"
            ) from None

    def _keys_and_spans(self, text: str) -> tuple[list[str], list[tuple[int, int]] | None]:
        if text.isascii():
            return token_keys(text, plurals=self._plurals), None
        tokens = tokenize(text, plurals=self._plurals)
        return [t.key for t in tokens], [(t.start, t.end) for t in tokens]

    def find(self, text: str) -> list[LabelHit]:
        """All label hits in ``text``, by position; within a label, hits inside a longer hit
        of the same label are dropped (``tabby cat`` is reported once, not also ``cat``)."""
        if not text or self._automaton is None:
            return []
        keys, spans = self._keys_and_spans(text)
        if not keys:
            return []
        hay = " " + " ".join(keys) + " "
        found = list(self._automaton.iter(hay))
        if not found:
            return []
        if spans is None:
            spans = token_spans(text)
        hits: list[LabelHit] = []
        for end_index, (n_tokens, bucket) in found:
            last = hay.count(" ", 0, end_index) - 1
            start, end = spans[last - n_tokens + 1][0], spans[last][1]
            hits.extend(LabelHit(label, term, start, end) for label, term in bucket)
        hits.sort(key=lambda h: (h.start, -h.end, h.label))
        reach: dict[str, int] = {}
        kept: list[LabelHit] = []
        for hit in hits:
            if hit.end <= reach.get(hit.label, -1):
                continue  # covered by an earlier, longer hit of the same label
            reach[hit.label] = hit.end
            kept.append(hit)
        return kept

    def find_label(self, text: str, label: str) -> list[LabelHit]:
        """The hits of one label in ``text``; ``UsageError`` if the label is unknown."""
        if not self._terms_of(label):
            return []
        return [hit for hit in self.find(text) if hit.label == label]

    def mentions(self, text: str) -> set[str]:
        """The labels mentioned in ``text`` (no spans: the fast path for counting)."""
        if not text or self._automaton is None:
            return set()
        keys = token_keys(text, plurals=self._plurals)
        if not keys:
            return set()
        return {
            label
            for _, (_, bucket) in self._automaton.iter(" " + " ".join(keys) + " ")
            for label, _ in bucket
        }

    def __repr__(self) -> str:
        n_terms = sum(map(len, self._terms.values()))
        return f"LabelMatcher(labels={len(self._terms)}, terms={n_terms}, plurals={self._plurals})"
