"""Dedup on a local Ray cluster (two worker processes) gives the local executor's edges and clusters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.planted_dedup import plant
from helpers.ray_cluster import local_ray_cluster
from sqlalchemy import select

from splitaudit.indexer.db.models import DedupEdge, DedupRun
from splitaudit.indexer.dedup.outputs import dedup_report
from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.pipeline.ray_match import Executor
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace

pytestmark = pytest.mark.slow
CHUNK = 5  # 22 items: five chunks, so both actors get some


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    with local_ray_cluster(cpus=2) as address:
        yield address


def _corpus(root: Path) -> Path:
    truth = plant(root)
    (root / "exact_of_orig0.png").write_bytes((root / "orig0.png").read_bytes())
    assert truth
    return root


def _run(ws: Workspace, executor: Executor | None, **kw: object) -> tuple[dict, set[tuple]]:
    run_id = create_dedup(ws, corpus="c", **kw)  # type: ignore[arg-type]
    run_dedup(ws, run_id, chunk_rows=CHUNK, executor=executor)
    with ws.sessions() as s:
        report = dedup_report(s, run_id)
        edges = {
            (e.a_id, e.b_id, e.kind, e.hamming, e.cosine, e.verify)
            for e in s.scalars(select(DedupEdge).where(DedupEdge.run_id == run_id))
        }
        assert s.get_one(DedupRun, run_id).chunks_done == 5
    return report, edges


def _clusters(report: dict) -> set[tuple[frozenset[str], str]]:
    return {(frozenset(m["key"] for m in c["members"]), c["kept"]) for c in report["clusters"]}


def test_ray_dedup_equals_local_hash_only_and_resumes(tmp_path: Path, ray_address: str) -> None:
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(_corpus(tmp_path / "corpus"))], embedder=None)
    executor = Executor("ray", ray_address=ray_address)
    local, local_edges = _run(ws, None)
    remote, remote_edges = _run(ws, executor)
    assert len(_clusters(local)) == 4  # the planted clusters (test_dedup checks which)
    assert _clusters(remote) == _clusters(local)
    assert remote_edges == local_edges and len(local_edges) >= 8
    assert remote["summary"] == local["summary"]

    # killed after two chunks, then run again: the local result, chunk by chunk
    run_id = create_dedup(ws, corpus="c")
    searched = 0

    def stop_after_two_chunks(_fraction: float, message: str) -> None:
        nonlocal searched
        searched += message.startswith("searched")
        if searched == 2:
            raise KeyboardInterrupt  # a killed run: not marked failed, resumable

    with pytest.raises(KeyboardInterrupt):
        run_dedup(ws, run_id, chunk_rows=CHUNK, executor=executor, progress=stop_after_two_chunks)
    with ws.sessions() as s:
        assert s.get_one(DedupRun, run_id).chunks_done == 2
    run_dedup(ws, run_id, chunk_rows=CHUNK, executor=executor)
    with ws.sessions() as s:
        resumed = {
            (e.a_id, e.b_id, e.kind, e.hamming, e.cosine, e.verify)
            for e in s.scalars(select(DedupEdge).where(DedupEdge.run_id == run_id))
        }
    assert resumed == local_edges


def test_ray_dedup_equals_local_with_embeddings(
    tmp_path: Path, ray_address: str, tiny_model_spec: str
) -> None:
    from splitaudit.indexer.embed.loader import load_embedder

    ws = Workspace.open(tmp_path / "home")
    embedder = load_embedder(tiny_model_spec)
    root = _corpus(tmp_path / "corpus")
    index_sources(ws, "c", [FolderSource(root)], embedder=embedder, model_spec=tiny_model_spec)
    local, local_edges = _run(ws, None, semantic=True)
    remote, remote_edges = _run(ws, Executor("ray", ray_address=ray_address), semantic=True)
    assert any(e[4] is not None for e in local_edges)  # cosines: the vector join was used
    assert remote_edges == local_edges
    assert _clusters(remote) == _clusters(local)
    semantic = [c for c in local["clusters"] if c.get("semantic")]
    assert [c for c in remote["clusters"] if c.get("semantic")] == semantic
