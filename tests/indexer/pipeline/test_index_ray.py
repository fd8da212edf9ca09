"""The Ray executor gives the local executor's result (same keys, hashes, vectors, failures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.db.models import FailedItem, Item
from splitaudit.indexer.pipeline.index import index_sources, open_corpus_index
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def _corpus(root: Path) -> Path:
    for shard, seeds in {"a": range(0, 5), "b": range(5, 9), "c": range(9, 12)}.items():
        (root / shard).mkdir(parents=True)
        for s in seeds:
            photo(s, (80, 64)).save(root / shard / f"img{s}.jpg", quality=90)
    (root / "b" / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    return root


def _state(ws: Workspace) -> tuple[dict[str, tuple], dict[str, np.ndarray], list[str]]:
    index = open_corpus_index(ws, "c")
    assert index.floats is not None
    with ws.sessions() as s:
        items = {i.key: i for i in s.scalars(select(Item))}
        failed = sorted(s.scalars(select(FailedItem.key)).all())
    rows = {
        k: (i.sha256, i.pixel_digest, i.phash, i.dhash, i.label, i.width, i.uri)
        for k, i in items.items()
    }
    vectors = {k: index.floats.index.reconstruct(i.id) for k, i in items.items()}
    assert index.hashes.count == len(items) == index.floats.count
    return rows, vectors, failed


@pytest.mark.slow
def test_ray_executor_equals_local(tmp_path: Path, tiny_model_spec: str) -> None:
    import ray

    from splitaudit.indexer.embed.loader import load_embedder

    root = _corpus(tmp_path / "corpus")
    embedder = load_embedder(tiny_model_spec)
    local = Workspace.open(tmp_path / "local")
    index_sources(
        local,
        "c",
        [FolderSource(root)],
        embedder=embedder,
        batch_size=4,
        model_spec=tiny_model_spec,
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = Workspace.open(tmp_path / "ray")
        summary = index_sources(
            remote,
            "c",
            [FolderSource(root)],
            embedder=embedder,
            batch_size=4,
            model_spec=tiny_model_spec,
            executor="ray",
            workers=2,
        )
        again = index_sources(
            remote,
            "c",
            [FolderSource(root)],
            embedder=embedder,
            batch_size=4,
            model_spec=tiny_model_spec,
            executor="ray",
            workers=2,
        )
    finally:
        ray.shutdown()
    assert (summary.indexed, summary.failed, summary.shards_done) == (12, 1, 3)
    assert (again.indexed, again.shards_skipped) == (0, 3)
    want_rows, want_vecs, want_failed = _state(local)
    got_rows, got_vecs, got_failed = _state(remote)
    assert got_rows == want_rows and got_failed == want_failed == ["b/broken.jpg"]
    for key, vec in want_vecs.items():
        np.testing.assert_allclose(got_vecs[key], vec, atol=1e-5)
