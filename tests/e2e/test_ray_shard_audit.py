"""An audit on a local Ray cluster (two worker processes), its corpus index cut into one shard
per actor, finds the local executor's pairs: same rows, items, kinds, Hamming distances and
cosines to the bit; with a Flat index (two 16k-row block ranges) and an IVF one (two list
ranges; list by list for a large split, FAISS's own search for a small one) whose hash index
has multi-index tables (cut in two position ranges too)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.ray_cluster import local_ray_cluster

from bench.dedup import build
from bench.ray_scale import synthetic_split
from splitaudit.indexer.match.engine import match_corpus
from splitaudit.indexer.match.thresholds import thresholds_for_model
from splitaudit.indexer.pipeline.index import open_corpus_index
from splitaudit.indexer.pipeline.ray_match import match_corpus_on_ray
from splitaudit.indexer.store.float_index import BATCHED_PER_LIST
from splitaudit.indexer.store.policy import IndexPolicy
from splitaudit.indexer.workspace import Workspace

pytestmark = pytest.mark.slow
ITEMS = 20_000  # two Flat shards: 16,384 + 3,616 rows


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    with local_ray_cluster(cpus=2) as address:
        yield address


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("shards") / "home"
    build(ITEMS, home)
    return home


def _pairs(pairs: list[Any]) -> set[tuple[Any, ...]]:
    return {(p.row, p.item_id, p.kind, p.hamming, p.cosine, p.verify) for p in pairs}


def _both(
    ws: Workspace, address: str, policy: IndexPolicy | None, queries: int, hash_shard_min: int = 0
) -> Any:
    """(local pairs, Ray pairs, the index's info) of one synthetic split."""
    index = open_corpus_index(ws, "syn", policy)
    state, vectors = synthetic_split(ws, queries)
    _hash_twins(ws, state, vectors, index)
    th = thresholds_for_model("synthetic-64")
    with ws.sessions() as s:
        local = match_corpus(
            s, corpus_id=1, index=index, state=state, vectors=vectors, thresholds=th
        ).pairs
    remote = match_corpus_on_ray(
        ws,
        corpus="syn",
        corpus_id=1,
        index=index,
        state=state,
        vectors=vectors,
        thresholds=th,
        address=address,
        hash_shard_min=hash_shard_min,  # 0: a hash index with tables is cut at any size
    )
    return _pairs(local), _pairs(remote), index.info()


def _hash_twins(ws: Workspace, state: Any, vectors: Any, index: Any, n: int = 20) -> None:
    """The last ``2n`` rows take the pHash and the stored vector of the first and last ``n``
    corpus items: twins in either shard. (Their vectors were random before 0.5.0, so only the
    hashes found them; a pHash match the embedding disagrees with now needs pixels to be near,
    which these corpus items do not have.)"""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Item
    from splitaudit.indexer.dedup.pairs import MIRROR_MASK
    from splitaudit.indexer.store.binary_index import signed_to_unsigned

    with ws.sessions() as s:
        first = s.scalars(select(Item.phash).order_by(Item.id).limit(n)).all()
        last = s.scalars(select(Item.phash).order_by(Item.id.desc()).limit(n)).all()
        ids = [
            *s.scalars(select(Item.id).order_by(Item.id).limit(n)).all(),
            *s.scalars(select(Item.id).order_by(Item.id.desc()).limit(n)).all(),
        ]
    hashes = signed_to_unsigned(np.array([*first, *last], np.int64))
    rows = slice(len(state) - len(hashes), len(state))
    state.phash[rows] = hashes
    state.phash_mirror[rows] = hashes ^ MIRROR_MASK
    vectors[rows] = np.stack([index.floats.index.reconstruct(int(i)) for i in ids])


def _mapped(caplog: pytest.LogCaptureFixture) -> list[int]:
    line = next(
        r.getMessage() for r in caplog.records if "bytes mapped per actor" in r.getMessage()
    )
    return [int(b) for b in line.rsplit(": ", 1)[1].split(",")]


def test_sharded_flat_audit_equals_local(
    home: Path, ray_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="splitaudit.indexer.pipeline.ray_match")
    ws = Workspace.open(home, migrate=False)
    try:
        local, remote, info = _both(ws, ray_address, None, 3000)
    finally:
        ws.close()
    assert info["vector_index"] == "Flat"
    assert len(local) > 500 and any(kind == "exact" for _r, _i, kind, *_ in local)
    twins = {(r, i) for r, i, _k, h, c, _v in local if r >= 3000 - 40 and h == 0 and c is not None}
    assert len(twins) == 40 and {i <= 20 for _r, i in twins} == {True, False}  # both shards
    assert remote == local
    assert f"hash index ({ITEMS} hashes) in 1 shards" in caplog.text  # exhaustive: whole
    mapped = _mapped(caplog)  # each actor maps its own rows: 64 fp32 + an int64 id each
    assert mapped == [16_384 * (4 * 64 + 8), (ITEMS - 16_384) * (4 * 64 + 8)]


@pytest.mark.parametrize("queries", [3000, 40])
def test_sharded_ivf_audit_equals_local(
    home: Path, ray_address: str, caplog: pytest.LogCaptureFixture, queries: int
) -> None:
    caplog.set_level(logging.INFO, logger="splitaudit.indexer.pipeline.ray_match")
    policy = IndexPolicy(flat_max=1000, hash_flat_max=1000, calibration_queries=200)
    ws = Workspace.open(home, migrate=False)
    try:
        local, remote, info = _both(ws, ray_address, policy, queries)
    finally:
        ws.close()
    assert str(info["vector_index"]).startswith("IVF")
    nlist = int(str(info["vector_index"])[3:].split(",")[0])
    by_list = queries * int(info["nprobe"]) >= BATCHED_PER_LIST * nlist
    assert by_list == (queries == 3000)  # the large split list by list, the small one by FAISS
    assert local and remote == local
    mapped = _mapped(caplog)
    assert len(mapped) == 2 and all(0 < b < 0.75 * sum(mapped) for b in mapped)
    # beyond hash_flat_max the hash index has tables: cut in two as well
    assert f"hash index ({ITEMS} hashes) in 2 shards" in caplog.text
