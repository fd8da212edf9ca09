"""The ``label_leak`` tier: a test item's label given away by its own metadata or a matched corpus item."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from splitaudit.indexer.db.models import Corpus, Item, SplitItem
from splitaudit.indexer.db.queries import in_chunks
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.labels.leak import label_prevalence, match_leak, self_leak
from splitaudit.indexer.labels.matcher import LabelMatcher
from splitaudit.indexer.labels.names import label_terms
from splitaudit.indexer.match.found import FoundMatch
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.sources.hf_features import LABEL_DERIVED_KEY
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)
MAX_HITS = 5
PREVALENCE_MAX_ITEMS = 2_000_000


@dataclass
class LabelTierResult:
    """Label-leak matches and per-label caption prevalence."""

    matches: list[FoundMatch] = field(default_factory=list)
    prevalence: dict[str, dict[str, int]] = field(default_factory=dict)


def label_leak_matches(
    ws: Workspace,
    state: SplitState,
    visual: Sequence[FoundMatch],
    params: Mapping[str, Any],
) -> LabelTierResult:
    """Self-leaks for every labelled item, match-leaks over the visual matches, and prevalence."""
    names: Mapping[str, Sequence[str]] = params.get("label_names") or {}
    labels = sorted({lab for lab in state.labels if lab})
    matcher = LabelMatcher(label_terms(labels, names))
    label_of = {
        int(sid): lab for sid, lab in zip(state.ids.tolist(), state.labels, strict=True) if lab
    }
    out = LabelTierResult()
    with ws.sessions() as s:
        ids = list(label_of)
        for chunk in in_chunks(ids):
            for it in s.scalars(select(SplitItem).where(SplitItem.id.in_(chunk))):
                meta = dict(it.meta or {})
                text_fields = meta.pop("text_fields", None) or {}
                # columns restating the label (a dataset's label name, another ClassLabel view)
                skipped = sorted(set(meta.pop(LABEL_DERIVED_KEY, None) or ()) & set(meta))
                meta = {k: v for k, v in meta.items() if k not in skipped}
                hits = self_leak(
                    key=it.key,
                    label=label_of[it.id],
                    matcher=matcher,
                    text_fields={
                        f"exif:{k}" if ":" not in k else k: v for k, v in text_fields.items()
                    },
                    metadata=meta,
                    caption=it.caption,
                )
                if hits:
                    read = {"metadata_read": sorted(meta), "label_columns_skipped": skipped}
                    out.matches.append(_row(it.id, None, None, hits, {"type": "self", **read}))
        by_pair = {(m.split_item_id, m.item_id): m for m in visual if m.item_id}
        item_ids = sorted({iid for sid, iid in by_pair if sid in label_of})
        items: dict[int, Item] = {}
        for chunk in in_chunks(item_ids):
            for row in s.scalars(select(Item).where(Item.id.in_(chunk))):
                items[row.id] = row
        for (sid, iid), m in by_pair.items():
            item = items.get(iid)
            if item is None or sid not in label_of:
                continue
            meta = dict(item.meta or {})
            meta.pop("text_fields", None)
            meta.pop(LABEL_DERIVED_KEY, None)
            hits = match_leak(
                label=label_of[sid],
                matcher=matcher,
                caption=item.caption,
                key=item.key,
                url=item.url,
                metadata_tags=meta,
            )
            if hits:
                out.matches.append(_row(sid, iid, m.corpus, hits, {"type": "match", "via": m.kind}))
        out.prevalence = _prevalence(s, params.get("corpora_ids", []), matcher) if labels else {}
    return out


def _row(
    split_item_id: int,
    item_id: int | None,
    corpus: str | None,
    hits: Sequence[Any],
    extra: dict[str, Any],
) -> FoundMatch:
    return FoundMatch(
        split_item_id=split_item_id,
        item_id=item_id,
        corpus=corpus,
        kind=MatchKind.LABEL_LEAK,
        cosine=None,
        hamming=None,
        score=None,
        evidence={**extra, "hits": [h.to_dict() for h in hits[:MAX_HITS]], "hit_count": len(hits)},
    )


def _prevalence(
    session: Any, corpus_ids: Sequence[int], matcher: LabelMatcher
) -> dict[str, dict[str, int]]:
    """Per corpus name and label: how many corpus captions mention the label (context only)."""
    out: dict[str, dict[str, int]] = {}
    for corpus in session.scalars(select(Corpus).where(Corpus.id.in_(list(corpus_ids)))):
        stream = session.scalars(
            select(Item.caption)
            .where(Item.corpus_id == corpus.id, Item.caption.is_not(None))
            .limit(PREVALENCE_MAX_ITEMS)
            .execution_options(yield_per=10_000)
        )
        out[corpus.name] = dict(label_prevalence(stream, matcher))
    return out
