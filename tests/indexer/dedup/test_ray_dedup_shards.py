"""Dedup on a local Ray cluster (two worker processes) with the self-joins cut among the actors:
the local executor's edges (pair, kind, Hamming, cosine bits) and clusters, for each way the
vector join is cut — Flat blocks (exhaustive join), k-means cells of a Flat index, the lists of
an IVF index — each actor mapping only its part of the vector index."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.ray_cluster import local_ray_cluster
from sqlalchemy import select

from bench.dedup import build
from splitaudit.indexer.db.models import DedupEdge, DedupMember
from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.pipeline.index import open_corpus_index
from splitaudit.indexer.pipeline.ray_match import Executor
from splitaudit.indexer.store import vector_join
from splitaudit.indexer.store.float_index import INDEX_FILE
from splitaudit.indexer.store.policy import IndexPolicy
from splitaudit.indexer.workspace import Workspace

pytestmark = pytest.mark.slow
ITEMS = 20_000  # a Flat index of two 16,384-row blocks


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    with local_ray_cluster(cpus=2) as address:
        yield address


def _result(ws: Workspace, executor: Executor | None) -> tuple[set[Any], set[Any], Any]:
    run_id = create_dedup(ws, corpus="syn")
    summary = run_dedup(ws, run_id, executor=executor)
    with ws.sessions() as s:
        edges = {
            (e.a_id, e.b_id, e.kind, e.hamming, e.cosine, e.verify)
            for e in s.scalars(select(DedupEdge).where(DedupEdge.run_id == run_id))
        }
        groups: dict[tuple[bool, int], set[int]] = {}
        for c, sem, i in s.execute(
            select(DedupMember.cluster, DedupMember.semantic, DedupMember.item_id).where(
                DedupMember.run_id == run_id
            )
        ):
            groups.setdefault((bool(sem), int(c)), set()).add(int(i))
    return edges, {frozenset(g) for g in groups.values()}, summary


def _mapped(caplog: pytest.LogCaptureFixture) -> list[int]:
    for record in caplog.records:
        found = re.search(r"vector join shards mapped ([\d,]+) bytes", record.getMessage())
        if found:
            return [int(b) for b in found.group(1).split(",")]
    raise AssertionError("the Ray run logged no vector join shards")


def _same_as_local(
    tmp_path: Path,
    address: str,
    caplog: pytest.LogCaptureFixture,
    policy: IndexPolicy | None = None,
) -> tuple[int, list[int]]:
    home = tmp_path / "home"
    build(ITEMS, home)
    ws = Workspace.open(home, migrate=False)
    if policy is not None:  # the index rebuilt (and saved) as this policy says
        open_corpus_index(ws, "syn", policy)
    local_edges, local_clusters, local_summary = _result(ws, None)
    index_bytes = (ws.corpus_dir("syn") / INDEX_FILE).stat().st_size  # saved by now
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="splitaudit.indexer.dedup.ray_run"):
        edges, clusters, summary = _result(ws, Executor("ray", ray_address=address))
    assert len(local_edges) > 500  # the planted copies (5% of the corpus)
    assert edges == local_edges
    assert clusters == local_clusters and summary == local_summary
    ws.close()
    return index_bytes, _mapped(caplog)


def test_flat_blocks(tmp_path: Path, ray_address: str, caplog: pytest.LogCaptureFixture) -> None:
    whole, mapped = _same_as_local(tmp_path, ray_address, caplog)
    assert len(mapped) == 2 and mapped[0] > mapped[1] > 0  # 16,384 rows, then the rest
    assert sum(mapped) < whole


def test_kmeans_cells_of_a_flat_index(
    tmp_path: Path,
    ray_address: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the driver plans the join: cells instead of the exhaustive join, here and on Ray alike
    monkeypatch.setattr(vector_join, "EXACT_JOIN_MAX", 5_000)
    whole, mapped = _same_as_local(tmp_path, ray_address, caplog)
    assert len(mapped) == 2 and all(0 < m < 0.7 * whole for m in mapped)


def test_ivf_lists(tmp_path: Path, ray_address: str, caplog: pytest.LogCaptureFixture) -> None:
    policy = IndexPolicy(flat_max=5_000, calibration_queries=200)
    whole, mapped = _same_as_local(tmp_path, ray_address, caplog, policy)
    assert len(mapped) == 2 and all(0 < m < 0.7 * whole for m in mapped)
