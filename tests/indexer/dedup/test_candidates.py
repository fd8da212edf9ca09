"""Dedup hands the engine only the items a join table pairs with another: same edges, fewer rows."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers.planted_dedup import plant
from sqlalchemy import select, update

from bench.dedup import build, plan, truth_pairs
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, DedupEdge, DedupMember, DedupRun, Item
from splitaudit.indexer.dedup import candidates as candidates_mod
from splitaudit.indexer.dedup import service
from splitaudit.indexer.dedup.candidates import (
    candidate_items,
    keep_candidates,
    knn_closed,
    others_held,
)
from splitaudit.indexer.dedup.join_items import UNKNOWN_SIDE, JoinItems, read_join_items
from splitaudit.indexer.dedup.pairs import (
    MIRROR_MASK,
    Chunk,
    exact_groups,
    join_corpus,
    vector_batches,
)
from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.match.thresholds import thresholds_for_model
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.store.calibrate import iter_chunks
from splitaudit.indexer.store.corpus_index import sync_corpus_index
from splitaudit.indexer.store.hamming_join import as_keys
from splitaudit.indexer.store.neighbours import Neighbours
from splitaudit.indexer.workspace import Workspace

N = 3000


@pytest.fixture
def synthetic(tmp_path: Path) -> Workspace:
    """bench.dedup's store-level corpus: N items, 5% planted copies, every item embedded."""
    build(N, tmp_path / "home")
    return Workspace.open(tmp_path / "home", migrate=False)


def _run_rows(ws: Workspace, run_id: int) -> tuple[list[tuple], list[tuple], dict]:
    with ws.sessions() as s:
        edges = sorted(
            (e.a_id, e.b_id, e.kind, e.hamming, e.cosine, e.verify)
            for e in s.scalars(select(DedupEdge).where(DedupEdge.run_id == run_id))
        )
        members = sorted(
            (m.cluster, m.semantic, m.item_id, m.kept, m.tier, m.partner_id, m.hamming, m.cosine)
            for m in s.scalars(select(DedupMember).where(DedupMember.run_id == run_id))
        )
        return edges, members, dict(s.get_one(DedupRun, run_id).summary)


def _with_and_without_filter(
    ws: Workspace, corpus: str, monkeypatch: pytest.MonkeyPatch, **kw: object
) -> tuple[tuple, tuple, list[int]]:
    handed: list[int] = []
    real = candidates_mod.keep_candidates

    def counting(chunks, cands):  # type: ignore[no-untyped-def]
        for n, chunk in real(chunks, cands):
            handed.append(len(chunk.ids))
            yield n, chunk

    monkeypatch.setattr(service, "keep_candidates", counting)
    filtered = create_dedup(ws, corpus=corpus, **kw)  # type: ignore[arg-type]
    run_dedup(ws, filtered)
    rows_filtered, handed_filtered = _run_rows(ws, filtered), list(handed)
    monkeypatch.setattr(service, "candidate_items", lambda *_a, **_k: None)
    every = create_dedup(ws, corpus=corpus, **kw)  # type: ignore[arg-type]
    run_dedup(ws, every)
    assert sum(handed) - sum(handed_filtered) > sum(handed_filtered)  # all rows the second time
    return rows_filtered, _run_rows(ws, every), handed_filtered


def test_store_level_dedup_is_the_same_with_only_candidates(
    synthetic: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every item asks for its pHash k-NN candidates (within 20 bits each of 3,000 uniform
    # hashes has ~5 neighbours); those at a cosine under candidate_cosine do not reach the
    # engine (knn_closed)
    filtered, every, handed = _with_and_without_filter(synthetic, "syn", monkeypatch, semantic=True)
    assert filtered == every  # same edges (both directions), members and summary
    edges, _members, summary = filtered
    assert len(edges) > 100 and summary["duplicates"] > 100
    # the engine saw a small share of the items: the planted copies and a few neighbours
    assert 0 < sum(handed) < 0.2 * N
    found = {(a, b) for a, b, *_rest in edges}
    assert len(found & truth_pairs(plan(N)[0])) >= 0.95 * len(found)


def test_pixel_dedup_is_the_same_with_only_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real images, hashes only: every item asks for hash k-NN candidates (the nearest table)
    and the verifier decides them; unrelated filler images are left out."""
    plant(tmp_path / "corpus")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=None)
    filtered, every, handed = _with_and_without_filter(ws, "c", monkeypatch)
    assert filtered == every
    assert filtered[1]  # clusters found
    with ws.sessions() as s:
        total = len(s.scalars(select(Item.id)).all())
    assert 0 < sum(handed) < total  # the filler images with no near hash are left out


def test_candidates_are_every_item_with_a_pair_and_few_others(synthetic: Workspace) -> None:
    ws = synthetic
    th = thresholds_for_model("synthetic-64")
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, 1), ws.corpus_dir("syn"))
        groups = list(exact_groups(s, 1))
        skip = {i for g in groups for i in g[1:]}
        grouped = {i for g in groups for i in g}
        items = read_join_items(s, 1, skip, small_side=th.small_side)
        joined, _stats = join_corpus(
            s,
            corpus_id=1,
            corpus_dir=ws.corpus_dir("syn"),
            index=index,
            thresholds=th,
            skip=skip,
            items=items,
        )
        refs = vector_batches(s, 1)
    everyone = candidate_items(joined, items, th, grouped)
    cands = candidate_items(
        joined, items, th, grouped, lambda: iter_chunks(ws.corpus_dir("syn"), refs)
    )
    assert cands is not None and np.all(np.diff(cands) > 0)
    # within 20 bits nearly every uniform hash has a k-NN neighbour: without the cosines that
    # vouch for none of those pairs, nearly every item would go to the engine
    assert everyone is not None and len(everyone) > 0.9 * len(items.ids)
    assert candidate_items(index, items, th, grouped) is None  # not joined: search every item
    truth = truth_pairs(plan(N)[0])
    planted = {i for pair in truth for i in pair} - skip
    assert planted <= set(cands.tolist())  # every queried planted member
    assert len(cands) < 2 * len(planted) + len(grouped)
    assert not set(cands.tolist()) & skip


def test_others_reads_a_table_like_the_stand_in_stores() -> None:
    table = Neighbours(
        keys=np.array([10, 20, 30, 40], np.int64),
        offsets=np.array([0, 1, 3, 5, 5], np.int64),
        ids=np.array([1, 2, 5, 3, 7], np.int64),
        scores=np.array([0, 0, 6, 2, 9], np.int32),
    )
    keys = np.array([10, 20, 20, 30, 40, 50], np.int64)
    own = np.array([1, 2, 9, 3, 4, 6], np.int64)
    # 10: only itself; 20: another (5) for item 2, two others for 9; 30: 7 beside itself;
    # 40: empty list; 50: not in the table, so the real store would be asked: kept
    assert others_held(table, keys, own, None, None).tolist() == [
        False,
        True,
        True,
        True,
        False,
        True,
    ]
    # within 4 bits, 30's other (7 at 9 bits) is too far; 20's 5 (at 6) too
    assert others_held(table, keys, own, None, 4).tolist() == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    # the first entry only: 20 for item 9 is item 2, another; 30's first is itself
    assert others_held(table, keys, own, 1, None).tolist() == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    cos = Neighbours(
        table.keys, table.offsets, table.ids, np.array([1, 1, 0.5, 1, 0.9], np.float32)
    )
    assert others_held(cos, keys, own, None, None, 0.8).tolist() == [
        False,
        False,
        True,
        True,
        False,
        True,
    ]


def test_keep_candidates_keeps_rows_and_vectors_aligned_and_empty_chunks() -> None:
    vecs = np.arange(12, dtype=np.float32).reshape(6, 2)
    chunks = [
        (0, Chunk(np.array([1, 2, 3], np.int64), vecs[:3])),
        (1, Chunk(np.array([4, 5, 6], np.int64), None)),
    ]
    out = list(keep_candidates(iter(chunks), np.array([2, 3, 9], np.int64)))
    assert [n for n, _c in out] == [0, 1]
    assert out[0][1].ids.tolist() == [2, 3] and out[0][1].vectors is not None
    assert out[0][1].vectors.tolist() == vecs[1:3].tolist()
    assert out[1][1].ids.tolist() == [] and out[1][1].vectors is None
    assert list(keep_candidates(iter(chunks), None)) == chunks


def test_join_items_read_as_the_rows_say(synthetic: Workspace) -> None:
    ws = synthetic
    with transaction(ws.sessions) as s:  # sizes: small, unknown (NULL, 0), and no embedding
        s.execute(update(Item).where(Item.id == 5).values(width=40, height=300))
        s.execute(update(Item).where(Item.id == 6).values(width=None))
        s.execute(update(Item).where(Item.id == 7).values(height=0))
        s.execute(update(Item).where(Item.id == 8).values(has_embedding=False))
        s.execute(update(Item).where(Item.id == 9).values(phash=None))
        s.execute(update(Item).where(Item.id == 10).values(phash=-1))
    with ws.sessions() as s:
        items = read_join_items(s, 1, {3, 4}, small_side=96)
        rows = {
            int(i): (int(p), w, h, bool(e))
            for i, p, w, h, e in s.execute(
                select(Item.id, Item.phash, Item.width, Item.height, Item.has_embedding).where(
                    Item.phash.is_not(None)
                )
            )
        }
    assert items.ids.tolist() == [i for i in rows if i not in (3, 4)]
    assert 9 not in items.ids.tolist() and 8 not in items.embedded.tolist()
    assert items.embedded.tolist() == sorted(i for i, r in rows.items() if r[3])
    by_id = dict(zip(items.ids.tolist(), range(len(items.ids)), strict=True))
    assert int(items.hashes[by_id[10]]) == 2**64 - 1  # signed -1 read unsigned
    for i in (1, 2, 11):
        assert int(items.hashes[by_id[i]]) == rows[i][0] % 2**64
    small = {i: bool(items.small[n]) for i, n in by_id.items()}
    # a 40-px side is small; unknown sizes (NULL, 0) are not
    assert small[5] and not small[6] and not small[7] and not small[11]
    assert UNKNOWN_SIDE >= 10**6


def test_knn_closed_leaves_open_every_pair_the_candidate_rule_could_verify(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An item is closed only when each of its pHash k-NN entries is a large pair of two
    embedded items at a cosine under candidate_cosine; anything else keeps it for the engine."""
    th = replace(
        thresholds_for_model("synthetic-64"),
        candidate_cosine=0.5,
        semantic_cosine=0.7,
        near_cosine=0.8,
    )
    ids = np.array([1, 2, 3, 4, 5, 6, 7], np.int64)
    hashes = np.array([10, 20, 30, 40, 50, 60, 70], np.uint64)
    # 1 -> 2 at cosine 0.3 (closed); 3 -> 4 at 0.6 (open); 5 -> 6, 6 small (open);
    # 7 -> 8, 8 not queried (an exact copy) but large and embedded, at cosine 0 (closed);
    # every entry 12 bits away
    table = Neighbours(
        keys=np.array([10, 30, 50, 70], np.int64),
        offsets=np.array([0, 2, 3, 4, 5], np.int64),
        ids=np.array([1, 2, 4, 6, 8], np.int64),
        scores=np.array([0, 12, 12, 12, 12], np.int32),
    )
    items = JoinItems(
        ids=ids,
        hashes=hashes,
        small=np.array([False, False, False, False, False, True, False]),
        embedded=np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int64),
        small_ids=np.array([6], np.int64),
    )
    basis = np.eye(4, dtype=np.float32)
    vecs = {
        1: basis[0],
        2: 0.3 * basis[0] + np.sqrt(0.91) * basis[1],
        3: basis[2],
        4: 0.6 * basis[2] + 0.8 * basis[3],
    }
    for i in (5, 6, 7, 8):
        vecs[i] = basis[i % 4]
    order = sorted(vecs)
    chunks = lambda: iter([(np.array(order, np.int64), np.stack([vecs[i] for i in order]))])  # noqa: E731
    # the mirrored queries (hash ^ MIRROR_MASK) are not in the table: an item is closed only
    # where both are answered, so the mirrored keys get empty answers here
    mirrored = as_keys(hashes ^ MIRROR_MASK)
    full = Neighbours(
        keys=np.sort(np.r_[table.keys, mirrored]),
        offsets=np.zeros(0, np.int64),
        ids=table.ids,
        scores=table.scores,
    )
    rows = {
        int(k): (table.ids[lo:hi], table.scores[lo:hi])
        for k, lo, hi in zip(table.keys, table.offsets[:-1], table.offsets[1:], strict=True)
    }
    offsets, got_ids, got_scores = [0], [], []
    for k in full.keys.tolist():
        i, sc = rows.get(int(k), (np.zeros(0, np.int64), np.zeros(0, np.int32)))
        got_ids += i.tolist()
        got_scores += sc.tolist()
        offsets.append(len(got_ids))
    full = Neighbours(
        full.keys,
        np.array(offsets, np.int64),
        np.array(got_ids, np.int64),
        np.array(got_scores, np.int32),
    )
    closed = knn_closed(items, full, th, chunks, 4)
    # 2, 4 and 6's hashes are not queries of the table: kept open; 1 and 7 closed; 3, 5 open
    assert closed.tolist() == [1, 7]
    # beyond 20 bits an entry is not a candidate at all: 3's partner then counts for nothing
    far = Neighbours(full.keys, full.offsets, full.ids, np.where(full.ids == 4, 21, full.scores))
    assert knn_closed(items, far, th, chunks, 4).tolist() == [1, 3, 7]
    # a cosine that makes the pair semantic keeps it too (a semantic_cosine under 0.3)
    assert knn_closed(items, full, replace(th, semantic_cosine=0.25), chunks, 4).tolist() == [7]
    # the vectors would not fit the budget: nothing is closed
    monkeypatch.setattr(candidates_mod, "CLOSED_MAX_BYTES", 8)
    assert knn_closed(items, full, th, chunks, 4).tolist() == []
