"""The dedup's second-witness rule: a pHash-only near pair beyond WITNESS_HAMMING bits between two
embedded items needs cosine >= candidate_cosine; planted copies keep their edges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.dedup import build, found_pairs, plan, truth_pairs
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, Item
from splitaudit.indexer.dedup import pairs
from splitaudit.indexer.dedup.pairs import (
    MIRROR_MASK,
    WITNESS_HAMMING,
    exact_groups,
    join_corpus,
    needs_witness,
)
from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.match.thresholds import thresholds_for_model
from splitaudit.indexer.store.corpus_index import sync_corpus_index
from splitaudit.indexer.store.joined import JoinedHashes
from splitaudit.indexer.store.vectors import iter_batches
from splitaudit.indexer.workspace import Workspace

N = 1500


def _flip(value: int, bits: list[int]) -> int:
    h = value & (2**64 - 1)
    for b in bits:
        h ^= 1 << b
    return h - 2**64 if h >= 2**63 else h


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Workspace, list[tuple[int, int, int]]]:
    """The bench corpus plus three unrelated singletons whose pHash is put 5, 7 and 8 bits from
    another singleton's (plain, plain, mirrored): chance collisions, random embeddings."""
    build(N, tmp_path / "home")
    cluster, _member = plan(N)
    singles = [int(i) + 1 for i in np.flatnonzero(cluster < 0)[:6]]
    ws = Workspace.open(tmp_path / "home", migrate=False)
    collisions = []
    with transaction(ws.sessions) as s:
        for n, bits in enumerate((5, 7, 8)):
            a, b = singles[2 * n], singles[2 * n + 1]
            ha = int(s.get_one(Item, a).phash)
            if n == 2:  # b's hash near a's mirrored stand-in
                ha = int(np.asarray([ha], np.int64).view(np.uint64)[0] ^ MIRROR_MASK)
                ha = ha - 2**64 if ha >= 2**63 else ha
            s.get_one(Item, b).phash = _flip(ha, list(range(bits)))
            collisions.append((a, b, bits))
    return ws, collisions


def test_needs_witness_only_for_a_lone_far_phash() -> None:
    assert needs_witness(["phash"], WITNESS_HAMMING + 1)
    assert not needs_witness(["phash"], WITNESS_HAMMING)
    assert not needs_witness(["phash", "verify"], 8)
    assert not needs_witness(["geometry"], 8)
    assert not needs_witness(["phash"], None)


def test_witness_cosines_are_the_vectors_dot_products(
    planted: tuple[Workspace, list[tuple[int, int, int]]],
) -> None:
    ws, collisions = planted
    th = thresholds_for_model("synthetic-64")
    with ws.sessions() as s:
        index = sync_corpus_index(s, s.get_one(Corpus, 1), ws.corpus_dir("syn"))
        skip = {i for g in exact_groups(s, 1) for i in g[1:]}
        joined, stats = join_corpus(
            s, corpus_id=1, corpus_dir=ws.corpus_dir("syn"), index=index, thresholds=th, skip=skip
        )
    assert isinstance(joined.hashes, JoinedHashes)
    witness = joined.hashes.witness
    assert stats["witness_pairs"] == len(witness) > len(collisions)
    vectors = {
        int(i): v
        for ids, vecs in iter_batches(ws.corpus_dir("syn"), [f"syn{0:09d}"])
        for i, v in zip(ids.tolist(), vecs, strict=True)
    }
    for a, b, _bits in collisions:
        assert witness[(a, b)] == pytest.approx(float(vectors[a] @ vectors[b]), abs=1e-5)
        assert witness[(a, b)] < th.candidate_cosine  # random 64-d vectors
    truth = truth_pairs(plan(N)[0])
    planted_ones = [c for pair, c in witness.items() if pair in truth]
    assert planted_ones and min(planted_ones) > 0.8  # the planted copies' own embeddings agree
    ws.close()


def test_dedup_drops_unwitnessed_hash_collisions_and_keeps_every_planted_pair(
    planted: tuple[Workspace, list[tuple[int, int, int]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, collisions = planted
    truth = truth_pairs(plan(N)[0])
    found: dict[int, set[tuple[int, int]]] = {}
    for strict in (64, WITNESS_HAMMING):  # 64: the audit's rule alone
        monkeypatch.setattr(pairs, "WITNESS_HAMMING", strict)
        run_id = create_dedup(ws, corpus="syn")
        run_dedup(ws, run_id)
        with ws.sessions() as s:
            found[strict] = found_pairs(s, run_id)
    # since 0.5.0 the audit's rule refuses a pHash match its embedding disagrees with (cosine
    # under candidate_cosine) unless the pixels verify it at verify_score: these corpus items
    # have no pixels, so their chance collisions are refused without the witness too
    assert not {(a, b) for a, b, _bits in collisions} & found[64]
    assert found[64] == truth
    # recall 1.0: every planted copy is within 6 bits at cosine ~0.96; no collision left
    assert found[WITNESS_HAMMING] == truth
    ws.close()
