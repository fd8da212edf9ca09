"""Indexing clip-retrieval folders without re-embedding: provenance rows, vectors from the npy, hashes from tars."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import photo
from sqlalchemy import func, select

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.db.models import Corpus, Item
from splitaudit.indexer.errors import ModelUnavailableError, UsageError
from splitaudit.indexer.pipeline.index import index_sources, open_corpus_index
from splitaudit.indexer.pipeline.precomputed import DeclaredModel, declare_model
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource
from splitaudit.indexer.workspace import Workspace

DIM = 16
DECLARED = DeclaredModel(model_id="declared-model", dim=DIM, spec=None, verified=False)


def write_part(root: Path, i: int, emb: np.ndarray, meta: dict[str, list[object]]) -> None:
    (root / "img_emb").mkdir(parents=True, exist_ok=True)
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    np.save(root / "img_emb" / f"img_emb_{i}.npy", emb)
    pq.write_table(pa.table(meta), root / "metadata" / f"metadata_{i}.parquet")


def laion_like(root: Path, sizes: tuple[int, ...] = (5, 3), seed: int = 0) -> dict[str, np.ndarray]:
    """Parts with fp16 embeddings (not unit-norm) and url/caption/key/similarity metadata."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for part, n in enumerate(sizes):
        emb = (3 * rng.standard_normal((n, DIM))).astype(np.float16)
        keys = [f"{part:05d}{i:04d}" for i in range(n)]
        write_part(
            root,
            part,
            emb,
            {
                "key": keys,
                "url": [f"https://img.example/{k}.jpg" for k in keys],
                "caption": [f"a photo number {k}" for k in keys],
                "similarity": [0.3] * n,
            },
        )
        out.update(zip(keys, emb.astype(np.float32), strict=True))
    return out


def tar_shard(path: Path, images: dict[str, bytes]) -> None:
    with tarfile.open(path, "w") as tf:
        for key, data in images.items():
            for name, blob in (
                (f"{key}.jpg", data),
                (f"{key}.json", json.dumps({"key": key}).encode()),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tf.addfile(info, io.BytesIO(blob))


def jpeg(seed: int) -> bytes:
    buf = io.BytesIO()
    photo(seed, (64, 48)).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def test_indexes_rows_and_vectors_without_bytes(tmp_path: Path) -> None:
    vectors = laion_like(tmp_path / "laion")
    ws = Workspace.open(tmp_path / "home")
    summary = index_sources(
        ws,
        "laion",
        [PrecomputedEmbeddingSource(tmp_path / "laion")],
        embedder=None,
        precomputed_model=DECLARED,
        batch_size=4,
    )
    assert (summary.indexed, summary.failed, summary.unhashed) == (8, 0, 8)
    with ws.sessions() as s:
        corpus = s.scalar(select(Corpus))
        assert corpus is not None and (corpus.model_id, corpus.embed_dim) == ("declared-model", DIM)
        items = {i.key: i for i in s.scalars(select(Item))}
    item = items["000000002"]
    assert (
        item.url == "https://img.example/000000002.jpg"
        and item.caption == "a photo number 000000002"
    )
    assert item.meta == {"similarity": 0.3} and item.locator == {"kind": "none"}
    assert item.sha256 is None and item.phash is None and item.has_embedding
    index = open_corpus_index(ws, "laion")
    assert index.hashes.count == 0 and index.floats is not None and index.floats.count == 8
    for key, want in vectors.items():
        got = index.floats.index.reconstruct(items[key].id)
        np.testing.assert_allclose(got, want / np.linalg.norm(want), atol=2e-3)
    again = index_sources(
        ws,
        "laion",
        [PrecomputedEmbeddingSource(tmp_path / "laion")],
        embedder=None,
        precomputed_model=DECLARED,
    )
    assert (again.indexed, again.skipped, again.shards_skipped) == (0, 8, 2)


def test_tars_give_hashes_where_bytes_exist(tmp_path: Path) -> None:
    laion_like(tmp_path / "laion", sizes=(4,))
    (tmp_path / "tars").mkdir()
    tar_shard(
        tmp_path / "tars" / "00000.tar",
        {"000000000": jpeg(1), "000000001": jpeg(2), "000000002": b"\xff\xd8\xff broken"},
    )
    ws = Workspace.open(tmp_path / "home")
    src = PrecomputedEmbeddingSource(tmp_path / "laion", shards_dir=tmp_path / "tars")
    summary = index_sources(ws, "laion", [src], embedder=None, precomputed_model=DECLARED)
    assert (summary.indexed, summary.failed, summary.unhashed) == (4, 0, 2)
    with ws.sessions() as s:
        items = {i.key: i for i in s.scalars(select(Item))}
    assert (
        items["000000000"].locator["kind"] == "tar" and len(items["000000000"].sha256 or "") == 64
    )
    assert items["000000001"].phash is not None and items["000000001"].width == 64
    assert items["000000002"].phash is None and "bytes_error" in items["000000002"].meta
    assert (
        items["000000003"].locator == {"kind": "none"}
        and "bytes_error" not in items["000000003"].meta
    )
    assert open_corpus_index(ws, "laion").hashes.count == 2


def test_dim_of_files_must_match_the_corpus_model(tmp_path: Path) -> None:
    laion_like(tmp_path / "laion")
    ws = Workspace.open(tmp_path / "home")
    wrong = DeclaredModel(model_id="declared-model", dim=DIM * 2, spec=None, verified=False)
    with pytest.raises(Exception, match="dim 16"):
        index_sources(
            ws,
            "laion",
            [PrecomputedEmbeddingSource(tmp_path / "laion")],
            embedder=None,
            precomputed_model=wrong,
        )
    with pytest.raises(UsageError, match="--precomputed-model"):
        index_sources(ws, "other", [PrecomputedEmbeddingSource(tmp_path / "laion")], embedder=None)


def _unavailable(spec: str) -> object:
    raise ModelUnavailableError(f"no weights for {spec}")


def test_declared_model_checked_when_known_trusted_otherwise(tiny_model_spec: str) -> None:
    loaded, embedder = declare_model(tiny_model_spec, 16)
    assert loaded.verified and loaded.spec == tiny_model_spec and embedder is not None
    assert loaded.model_id == embedder.model_id
    with pytest.raises(UsageError, match=r"dim 32 but .* produces dim 16"):
        declare_model(tiny_model_spec, 32)
    registry, none = declare_model("ViT-B-32:laion2b_s34b_b79k", 512, loader=_unavailable)  # type: ignore[arg-type]
    assert (
        none is None
        and registry.model_id == "open_clip:ViT-B-32:laion2b_s34b_b79k"
        and registry.verified
    )
    with pytest.raises(UsageError, match="produces dim 512"):
        declare_model("ViT-B-32:laion2b_s34b_b79k", 768, loader=_unavailable)  # type: ignore[arg-type]
    free, _ = declare_model("acme-clip-v7", 768, loader=_unavailable)  # type: ignore[arg-type]
    assert (free.model_id, free.spec, free.verified) == ("acme-clip-v7", None, False)
    folder, _ = declare_model("/models/acme", 768, loader=_unavailable)  # type: ignore[arg-type]
    assert (folder.model_id, folder.spec, folder.verified) == (
        "/models/acme",
        "/models/acme",
        False,
    )


def test_cli_indexes_precomputed_folder(tmp_path: Path) -> None:
    laion_like(tmp_path / "laion")
    runner = CliRunner()
    home = str(tmp_path / "home")
    missing = runner.invoke(
        cli, ["index", str(tmp_path / "laion"), "--corpus", "laion", "--home", home]
    )
    assert missing.exit_code == 2 and "--precomputed-model" in missing.output
    ok = runner.invoke(
        cli,
        [
            "index",
            str(tmp_path / "laion"),
            "--corpus",
            "laion",
            "--home",
            home,
            "--precomputed-model",
            "acme/clip-v7",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "indexed 8" in ok.output and "8 items have no image bytes" in ok.output
    ws = Workspace.open(Path(home))
    with ws.sessions() as s:
        assert s.scalar(select(Corpus.model_id)) == "acme/clip-v7"
        assert s.scalar(select(func.count(Item.id)).where(Item.has_embedding.is_(True))) == 8


def test_audit_finds_a_split_image_through_precomputed_vectors(
    tmp_path: Path, tiny_model_spec: str
) -> None:
    from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
    from splitaudit.indexer.embed.loader import load_embedder
    from splitaudit.indexer.reporting.report import audit_report
    from splitaudit.indexer.sources.open import open_split

    embedder = load_embedder(tiny_model_spec)
    images = [photo(seed, (200, 150)) for seed in range(6)]  # above the small-image side
    emb = embedder.embed(images).astype(np.float16)  # what clip-retrieval would have written
    write_part(
        tmp_path / "laion",
        0,
        emb,
        {"key": [f"k{i}" for i in range(6)], "caption": [f"c{i}" for i in range(6)]},
    )
    split = tmp_path / "split"
    split.mkdir()
    images[4].save(split / "leaked.png")
    photo(99, (200, 150)).save(split / "fresh.png")
    ws = Workspace.open(tmp_path / "home")
    declared, _ = declare_model(tiny_model_spec, 16)
    index_sources(
        ws,
        "laion",
        [PrecomputedEmbeddingSource(tmp_path / "laion")],
        embedder=None,
        precomputed_model=declared,
    )
    audit_id = create_audit(
        ws, split_id=create_split(ws, open_split(str(split)), name="s"), corpora=["laion"]
    )
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        report = audit_report(s, audit_id)
    by_key = {it["key"]: it for it in report["items"]}
    leaked = by_key["leaked.png"]
    assert leaked["verdict"] in ("near", "semantic")
    assert leaked["matches"][0]["corpus_key"] == "k4" and leaked["matches"][0]["cosine"] > 0.99
