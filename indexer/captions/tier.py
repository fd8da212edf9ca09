"""The ``caption`` tier: test captions that are exact or near copies of a corpus's captions.

A split item may carry several captions (retrieval and captioning test sets have ~5 per image);
:func:`split_item_captions` gathers them from the item's ``caption`` and its metadata. Each is
looked up in the corpus's caption index (:mod:`splitaudit.indexer.captions.query`); a split item
and a corpus item give at most one ``caption`` match, with the strongest evidence of any of the
item's captions.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from splitaudit.indexer.captions.index import CaptionIndex
from splitaudit.indexer.captions.query import CaptionThresholds, find_caption_matches
from splitaudit.indexer.captions.sync import open_caption_index, sync_caption_index
from splitaudit.indexer.db.models import SplitItem
from splitaudit.indexer.db.queries import in_chunks
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.match.found import FoundMatch

if TYPE_CHECKING:
    from splitaudit.indexer.workspace import Workspace

__all__ = ["CAPTION_KIND", "caption_matches", "split_item_captions"]

CAPTION_KIND = MatchKind.CAPTION.value
# Metadata keys that may hold (lists of) captions: HF ``captions``/``sentences``, COCO ``raw``...
CAPTION_KEYS = ("caption", "captions", "sentences", "sentence", "texts", "text", "raw", "alt_text")
_NESTED_KEYS = ("raw", "caption", "text", "sentence")
_LIST_TEXT_MAX = 200_000  # a stringified list longer than this is not parsed as one
_MAX_CAPTIONS = 64  # per split item


def split_item_captions(caption: str | None, meta: Mapping[str, Any] | None) -> list[str]:
    """Every caption of a split item: its ``caption`` and caption-like metadata, de-duplicated.

    Accepted forms: a plain string; a string with one caption per line or ``" | "``-separated
    captions (each part, and the whole); a JSON or Python list written into a text cell (how a
    list column looks once flattened to text); a metadata list of strings or of
    ``{"raw"|"caption"|"text": ...}`` records (COCO / Flickr30k layouts).
    """
    found: list[str] = []
    _collect(caption, found)
    for key in CAPTION_KEYS:
        if meta and key in meta:
            _collect(meta[key], found)
    seen: set[str] = set()
    out = []
    for text in found:
        text = text.strip()
        if text and text not in seen:
            seen.add(text)
            out.append(text)
    return out[:_MAX_CAPTIONS]


def _collect(value: Any, out: list[str]) -> None:
    if value is None:
        return
    if isinstance(value, Mapping):
        for key in _NESTED_KEYS:
            if key in value:
                _collect(value[key], out)
        return
    if isinstance(value, list | tuple):
        for v in value:
            _collect(v, out)
        return
    if not isinstance(value, str):
        return
    text = value.strip()
    if text.startswith("[") and text.endswith("]") and len(text) <= _LIST_TEXT_MAX:
        parsed = _parse_list(text)
        if parsed is not None:
            _collect(parsed, out)
            return
    out.append(text)
    parts = [p for line in text.splitlines() for p in line.split(" | ")]
    if len(parts) > 1:
        out.extend(parts)


def _parse_list(text: str) -> list[Any] | None:
    """A list written as JSON or as a Python literal; ``None`` when it is neither."""
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, list):
            return value
    return None


def caption_matches(
    ws: Workspace,
    split_item_ids: Sequence[int],
    corpus: str,
    *,
    thresholds: CaptionThresholds | None = None,
    sync: bool = True,
    index: CaptionIndex | None = None,
) -> list[FoundMatch]:
    """``caption`` matches of the given split items against ``corpus``.

    ``sync`` first brings the corpus's caption index up to date (cheap when it is: it reads
    only items above its watermark), so corpora indexed before the index existed work too.
    """
    captions = _split_captions(ws, split_item_ids)
    if not captions:
        return []
    if index is None:
        if sync:
            sync_caption_index(ws, corpus)
        index = open_caption_index(ws, corpus)
    hits = find_caption_matches(index, captions, thresholds=thresholds)
    return [
        FoundMatch(
            split_item_id=hit.test_id,
            item_id=hit.item_id,
            corpus=corpus,
            kind=CAPTION_KIND,
            cosine=None,
            hamming=None,
            score=round(hit.jaccard, 4),
            evidence=hit.evidence(),
        )
        for hit in hits
    ]


def _split_captions(ws: Workspace, split_item_ids: Sequence[int]) -> list[tuple[int, str]]:
    """``(split item id, caption)`` for every caption of those split items, in id order."""
    out: list[tuple[int, str]] = []
    with ws.sessions() as s:
        for part in in_chunks(sorted({int(i) for i in split_item_ids})):
            rows = s.execute(
                select(SplitItem.id, SplitItem.caption, SplitItem.meta).where(
                    SplitItem.id.in_(part)
                )
            )
            for item_id, caption, meta in rows:
                out.extend((int(item_id), text) for text in split_item_captions(caption, meta))
    out.sort(key=lambda pair: pair[0])
    return out
