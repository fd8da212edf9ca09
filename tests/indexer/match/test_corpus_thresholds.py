"""Per-corpus thresholds: measured, calibrated at index time (tiny model), literature fallback, overrides."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import photo

from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
from splitaudit.indexer.db.models import Audit
from splitaudit.indexer.match.calibrate_thresholds import (
    EDITS,
    ThresholdCalibration,
    choose_cosines,
    null_ceiling,
)
from splitaudit.indexer.match.corpus_thresholds import (
    RECALIBRATE_FACTOR,
    load_corpus_thresholds,
    thresholds_for_corpus,
)
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS, LITERATURE_CLIP
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.reporting.formats import render_markdown
from splitaudit.indexer.reporting.report import audit_report
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.store.sidecar import THRESHOLDS_FILE
from splitaudit.indexer.workspace import Workspace


def _photos(root: Path, seeds: range) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        photo(seed, (200, 150)).save(root / f"p{seed:03d}.jpg", quality=92)
    return root


@pytest.fixture(scope="module")
def tiny_embedder(tiny_model_spec: str) -> object:
    from splitaudit.indexer.embed.loader import load_embedder

    return load_embedder(tiny_model_spec)


def test_choose_cosines_follows_the_documented_margins() -> None:
    rng = np.random.default_rng(0)
    # an efficientnet-like null (median ~0.18, q99 ~0.42) and copies mostly above 0.6
    null = np.clip(rng.normal(0.18, 0.1, 200_000), -1, 1).astype(np.float32)
    copies = np.clip(rng.normal(0.93, 0.08, 400), -1, 1).astype(np.float32)
    near, semantic, candidate = choose_cosines(null, copies)
    ceiling = null_ceiling(null)
    assert 0.6 < ceiling < 0.7
    assert near == pytest.approx(ceiling + 0.13, abs=0.011)
    assert ceiling < semantic < near and candidate < semantic
    # a CLIP-like null sits high: the margin shrinks to half the distance to 1
    clip_null = np.clip(rng.normal(0.55, 0.08, 200_000), -1, 1).astype(np.float32)
    near, semantic, _ = choose_cosines(clip_null, copies)
    assert null_ceiling(clip_null) < semantic < near <= 1.0
    assert near - null_ceiling(clip_null) < 0.13


def test_calibration_record_round_trips_and_applies_only_cosines() -> None:
    record = ThresholdCalibration(
        source="calibrated",
        model_id="m",
        near_cosine=0.9,
        semantic_cosine=0.85,
        candidate_cosine=0.6,
        null_pairs=10,
    )
    again = ThresholdCalibration.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    applied = record.apply(DEFAULT_THRESHOLDS)
    assert (applied.near_cosine, applied.semantic_cosine, applied.candidate_cosine) == (
        0.9,
        0.85,
        0.6,
    )
    assert applied.phash_hamming == DEFAULT_THRESHOLDS.phash_hamming
    assert applied.verify_score == DEFAULT_THRESHOLDS.verify_score


def test_index_calibrates_the_tiny_model_and_audits_use_it(
    tmp_path: Path, tiny_embedder: object, tiny_model_spec: str
) -> None:
    ws = Workspace.open(tmp_path / "home")
    data = _photos(tmp_path / "corpus", range(12))
    summary = index_sources(
        ws,
        "c",
        [FolderSource(data)],
        embedder=tiny_embedder,  # type: ignore[arg-type]
        model_spec=tiny_model_spec,
    )
    record = load_corpus_thresholds(ws.corpus_dir("c"), tiny_embedder.model_id)  # type: ignore[attr-defined]
    assert record is not None and record.source == "calibrated"
    assert summary.thresholds["source"] == "calibrated"
    assert record.corpus_count == 12 and record.null_items == 12
    assert record.copy_images == 12 and record.copy_pairs == 12 * len(EDITS)
    assert record.null_pairs == 66 + 12 * 11 * len(EDITS)  # every corpus pair + every cross pair
    assert set(record.copy_by_edit) == set(EDITS)
    # the random-weight tiny model cannot tell copies from unrelated images: the record says so
    assert "not separable" in record.note
    assert {"q0.5", "q0.99", "ceiling", "max"} <= set(record.null_quantiles)
    assert -1 <= record.candidate_cosine <= record.semantic_cosine <= record.near_cosine <= 1
    assert record.near_cosine > record.null_quantiles["ceiling"]
    saved = json.loads((ws.corpus_dir("c") / THRESHOLDS_FILE).read_text())
    assert saved["near_cosine"] == record.near_cosine and saved["source"] == "calibrated"

    split = create_split(ws, FolderSource(data), name="s")
    audit_id = create_audit(ws, split_id=split, corpora=["c"])
    override_id = create_audit(
        ws, split_id=split, corpora=["c"], thresholds={"candidate_cosine": -0.5}
    )
    with ws.sessions() as s:
        audit, override = s.get_one(Audit, audit_id), s.get_one(Audit, override_id)
        assert audit.thresholds["near_cosine"] == record.near_cosine
        assert audit.thresholds["semantic_cosine"] == record.semantic_cosine
        assert audit.params["threshold_source"]["source"] == "calibrated"
        assert "calibrated on this corpus" in audit.params["threshold_source"]["summary"]
        assert override.thresholds["candidate_cosine"] == -0.5
        assert override.thresholds["near_cosine"] == record.near_cosine
        assert override.params["threshold_source"]["overridden"] == ["candidate_cosine"]
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        report = audit_report(s, audit_id)
    assert report["model"]["thresholds"]["source"] == "calibrated"
    assert report["thresholds"]["near_cosine"] == record.near_cosine
    assert "Cosine thresholds (calibrated): near" in render_markdown(report)
    ws.close()


def test_calibration_is_kept_until_the_corpus_grows_by_the_factor(
    tmp_path: Path, tiny_embedder: object, tiny_model_spec: str
) -> None:
    ws = Workspace.open(tmp_path / "home")
    data = _photos(tmp_path / "corpus", range(5))
    index_sources(
        ws,
        "c",
        [FolderSource(data)],
        embedder=tiny_embedder,  # type: ignore[arg-type]
        model_spec=tiny_model_spec,
    )
    model_id = tiny_embedder.model_id  # type: ignore[attr-defined]
    first = load_corpus_thresholds(ws.corpus_dir("c"), model_id)
    assert first is not None and first.corpus_count == 5
    _photos(data, range(5, 8))  # 8 items: below 4x
    index_sources(
        ws,
        "c",
        [FolderSource(data)],
        embedder=tiny_embedder,  # type: ignore[arg-type]
        model_spec=tiny_model_spec,
    )
    assert load_corpus_thresholds(ws.corpus_dir("c"), model_id) == first
    _photos(data, range(8, 5 * RECALIBRATE_FACTOR))
    index_sources(
        ws,
        "c",
        [FolderSource(data)],
        embedder=tiny_embedder,  # type: ignore[arg-type]
        model_spec=tiny_model_spec,
    )
    grown = load_corpus_thresholds(ws.corpus_dir("c"), model_id)
    assert grown is not None and grown.corpus_count == 5 * RECALIBRATE_FACTOR
    assert grown.null_items == 5 * RECALIBRATE_FACTOR
    ws.close()


def test_precomputed_embeddings_without_bytes_record_the_literature_values(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from splitaudit.indexer.pipeline.precomputed import DeclaredModel
    from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource

    root = tmp_path / "laion"  # the clip-retrieval layout, URLs only (no image bytes)
    (root / "img_emb").mkdir(parents=True)
    (root / "metadata").mkdir()
    keys = [f"{i:09d}" for i in range(50)]
    np.save(
        root / "img_emb" / "img_emb_0.npy",
        np.random.default_rng(0).standard_normal((50, 16)).astype(np.float16),
    )
    pq.write_table(
        pa.table(
            {
                "key": keys,
                "url": [f"https://img.example/{k}.jpg" for k in keys],
                "caption": [f"photo {k}" for k in keys],
            }
        ),
        root / "metadata" / "metadata_0.parquet",
    )
    ws = Workspace.open(tmp_path / "home")
    declared = DeclaredModel(
        model_id="open_clip:ViT-B-32:laion2b_s34b_b79k", dim=16, spec=None, verified=False
    )
    summary = index_sources(
        ws,
        "web",
        [PrecomputedEmbeddingSource(str(root))],
        embedder=None,
        precomputed_model=declared,
    )
    record = load_corpus_thresholds(ws.corpus_dir("web"), declared.model_id)
    assert record is not None and record.source == "literature"
    assert summary.thresholds["source"] == "literature"
    assert (record.near_cosine, record.semantic_cosine, record.candidate_cosine) == (
        LITERATURE_CLIP["near_cosine"],
        LITERATURE_CLIP["semantic_cosine"],
        LITERATURE_CLIP["candidate_cosine"],
    )
    assert "precomputed" in record.note and "arXiv:2303.09540" in record.note
    assert "literature starting values" in record.summary()
    th, used = thresholds_for_corpus(ws.corpus_dir("web"), declared.model_id)
    assert used == record and th.near_cosine == LITERATURE_CLIP["near_cosine"]
    ws.close()


def test_measured_model_and_uncalibrated_corpora_never_borrow(tmp_path: Path) -> None:
    th, record = thresholds_for_corpus(tmp_path, "efficientnet-lite0:imagenet")
    assert th == DEFAULT_THRESHOLDS and record is not None and record.source == "measured"
    th, record = thresholds_for_corpus(tmp_path, "open_clip:ViT-B-32:an-old-corpus")
    assert record is not None and record.source == "literature"
    assert th.near_cosine == LITERATURE_CLIP["near_cosine"] != DEFAULT_THRESHOLDS.near_cosine
    th, record = thresholds_for_corpus(tmp_path, None)
    assert th == DEFAULT_THRESHOLDS and record is None


@pytest.mark.slow
def test_efficientnet_self_calibration_on_the_bench_photos_lands_near_the_measured_defaults() -> (
    None
):
    """Tolerance 0.05 per cosine: bench.accuracy's own sweep keeps zero false positives for
    ``near_cosine`` anywhere in 0.70-0.90 and ``semantic_cosine`` above 0.646 (its highest
    unrelated pair), and the calibration sees only the 18 scikit-image sample photos (a tail
    extrapolated from a few thousand pairs, not 600,000 measured ones). Only those: the other
    offline sources depend on what the machine has installed (with imagecorruptions' five
    near-alike frost textures added, near_cosine lands at 0.89)."""
    pytest.importorskip("skimage")
    from bench.accuracy.photos import collect_photos
    from splitaudit.indexer.embed.loader import load_embedder
    from splitaudit.indexer.match.calibrate_thresholds import (
        calibrate_from_curves,
        copy_cosines,
        null_cosines,
    )

    images = [p.image for p in collect_photos() if p.origin == "scikit-image"]
    assert len(images) >= 15
    embedder = load_embedder("efficientnet-lite0")
    vectors = embedder.embed(images)
    record = calibrate_from_curves(
        embedder.model_id,
        null_cosines(vectors, 100_000, np.random.default_rng(0)),
        copy_cosines(embedder, images),
        corpus_count=len(images),
        null_items=len(images),
    )
    assert record.near_cosine == pytest.approx(DEFAULT_THRESHOLDS.near_cosine, abs=0.05)
    assert record.semantic_cosine == pytest.approx(DEFAULT_THRESHOLDS.semantic_cosine, abs=0.05)
    assert record.candidate_cosine == pytest.approx(DEFAULT_THRESHOLDS.candidate_cosine, abs=0.05)
    assert record.semantic_cosine > 0.646  # above every unrelated photo-halves pair measured
