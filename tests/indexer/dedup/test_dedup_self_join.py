"""Dedup through the corpus self-join finds exactly the pairs the per-item searches find."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench.dedup import build, plan, truth_pairs
from splitaudit.indexer.db.models import Corpus
from splitaudit.indexer.dedup.pairs import (
    Edge,
    chunk_edges,
    exact_groups,
    iter_item_chunks,
    join_corpus,
    merge_edges,
)
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.match.thresholds import Thresholds, thresholds_for_model
from splitaudit.indexer.store import hamming_join, vector_join
from splitaudit.indexer.store.corpus_index import CorpusIndex, sync_corpus_index
from splitaudit.indexer.store.joined import JoinedFloats
from splitaudit.indexer.workspace import Workspace

N = 3000


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Workspace, CorpusIndex]:
    """A store-level corpus of N items with planted near / exact copies (bench.dedup's)."""
    build(N, tmp_path / "home")
    ws = Workspace.open(tmp_path / "home", migrate=False)
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, 1), ws.corpus_dir("syn"))
    return ws, index


def _edges(
    ws: Workspace,
    index: CorpusIndex,
    th: Thresholds,
    *,
    joined: bool,
    searched: list[int] | None = None,
) -> dict[tuple[int, int], Edge]:
    """The dedup's edges, per item or through the joins (``searched``: gets the searches
    the joined vector table could not answer and the store ran instead)."""
    with ws.sessions() as s:
        groups = list(exact_groups(s, 1))
        skip = {i for g in groups for i in g[1:]}
        grouped = {i for g in groups for i in g} if joined else None
        if joined:
            index, _stats = join_corpus(
                s,
                corpus_id=1,
                corpus_dir=ws.corpus_dir("syn"),
                index=index,
                thresholds=th,
                skip=skip,
            )
        found: list[Edge] = []
        for chunk in iter_item_chunks(s, 1, ws.corpus_dir("syn"), has_vectors=True, rows=1000):
            found += chunk_edges(
                s,
                corpus_id=1,
                index=index,
                chunk=chunk,
                skip=skip,
                thresholds=th,
                semantic=True,
                grouped=grouped,
            )
    found += [Edge(g[0], o, MatchKind.EXACT) for g in groups for o in g[1:]]
    if searched is not None and isinstance(index.floats, JoinedFloats):
        searched.append(index.floats.fallbacks)
    return merge_edges(found)


def _kinds(edges: dict[tuple[int, int], Edge]) -> dict[tuple[int, int], str]:
    return {k: e.kind for k, e in edges.items()}


@pytest.mark.slow
@pytest.mark.parametrize("small_side", [96, 1000])  # 1000: every item asks for hash k-NN
def test_joined_dedup_finds_the_per_item_pairs(
    corpus: tuple[Workspace, CorpusIndex], small_side: int
) -> None:
    ws, index = corpus
    th = replace(thresholds_for_model("synthetic-64"), small_side=small_side)
    per_item = _edges(ws, index, th, joined=False)
    searched: list[int] = []
    joined = _edges(ws, index, th, joined=True, searched=searched)
    assert _kinds(joined) == _kinds(per_item)  # no pair missed, no pair added
    # small images' DEDUP_SMALL_TOP_K nearest come from the join too: no query searched the
    # store again
    assert searched == [0]
    near = {k for k, kind in _kinds(joined).items() if kind != MatchKind.SEMANTIC}
    truth = truth_pairs(plan(N)[0])
    assert near and len(near & truth) >= 0.95 * len(near)
    # without pixels a small pair cannot be verified: only exact copies stay duplicates
    assert (
        len(near) > 100
        if small_side == 96
        else {e.kind for e in joined.values()} >= {MatchKind.EXACT}
    )


@pytest.mark.slow
@pytest.mark.parametrize("small_side", [96, 1000])
def test_cell_join_and_multi_index_knn_keep_every_visual_pair(
    corpus: tuple[Workspace, CorpusIndex], monkeypatch: pytest.MonkeyPatch, small_side: int
) -> None:
    ws, index = corpus
    th = replace(thresholds_for_model("synthetic-64"), small_side=small_side)
    per_item = _kinds(_edges(ws, index, th, joined=False))
    monkeypatch.setattr(vector_join, "EXACT_JOIN_MAX", 500)  # cells, not exhaustive
    monkeypatch.setattr(hamming_join, "BRUTE_PAIRS", 0)  # k-NN through multi-index hashing
    searched: list[int] = []
    joined = _kinds(_edges(ws, index, th, joined=True, searched=searched))
    assert searched == [0]
    visual = {k: v for k, v in per_item.items() if v != MatchKind.SEMANTIC}
    assert {k: v for k, v in joined.items() if v != MatchKind.SEMANTIC} == visual
    semantic = {k for k, v in per_item.items() if v == MatchKind.SEMANTIC}
    found = {k for k, v in joined.items() if v == MatchKind.SEMANTIC}
    assert found <= semantic and len(found) >= 0.99 * len(semantic)
    assert semantic or small_side == 1000  # small pairs are never semantic
