"""Each corpus's cosine thresholds for its own model: measured, calibrated at index time, or literature.

``calibrate_corpus_thresholds`` runs at the end of ``splitaudit index`` (like the vector
index's ``nprobe`` calibration) and records a ``ThresholdCalibration`` in the corpus's
``thresholds.json`` sidecar; it is re-derived when the corpus has grown ``RECALIBRATE_FACTOR``
times since. ``thresholds_for_corpus`` gives an audit the corpus's thresholds. No model ever
gets another model's cosines:

1. measured ones where ``bench.accuracy`` has them (``MODEL_THRESHOLDS``: efficientnet-lite0);
2. otherwise calibrated from the corpus (``splitaudit.indexer.match.calibrate_thresholds``): random pairs
   of a sample of stored vectors, and synthetic edits of a sample of images that have bytes,
   embedded with the corpus's model;
3. literature starting values for ViT-B/32-class CLIP only where neither is possible
   (precomputed embeddings without image bytes, too few items); the record says why.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Corpus, Item, VectorBatch
from splitaudit.indexer.db.queries import in_chunks
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.match.calibrate_thresholds import (
    MIN_NULL_PAIRS,
    ThresholdCalibration,
    calibrate_from_curves,
    copy_cosines,
    literature_calibration,
    measured_calibration,
    null_cosines,
)
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS, MODEL_THRESHOLDS, Thresholds
from splitaudit.indexer.sources.record import Locator
from splitaudit.indexer.store.calibrate import gather_rows
from splitaudit.indexer.store.sidecar import load_thresholds_sidecar, save_thresholds_sidecar

log = logging.getLogger(__name__)

RECALIBRATE_FACTOR = 4  # re-derive once the corpus holds 4x the items it was calibrated on
NULL_SAMPLE_ITEMS = 2000  # stored vectors drawn for the random-pair curve
NULL_PAIRS = 100_000
# images re-read and edited (x 8 edits) for the copy curve; a fixed cost (~430 forward passes),
# because fewer images make the tail estimate noisy: with 16 of the 28 bench photos the
# calibrated cosines of efficientnet-lite0 land 0.08 above the measured ones, with 28 within 0.02
COPY_SAMPLE_IMAGES = 48
MIN_COPY_IMAGES = 4


def load_corpus_thresholds(corpus_dir: Path, model_id: str | None) -> ThresholdCalibration | None:
    """The recorded calibration of a corpus, if it was made for ``model_id``."""
    raw = load_thresholds_sidecar(corpus_dir)
    if raw is None or model_id is None or raw.get("model_id") != model_id:
        return None
    try:
        return ThresholdCalibration.from_dict(raw)
    except TypeError as exc:
        log.warning(
            "%s: unreadable threshold record (%s); it is re-derived on the next index",
            corpus_dir,
            exc,
        )
        return None


def thresholds_for_corpus(
    corpus_dir: Path, model_id: str | None
) -> tuple[Thresholds, ThresholdCalibration | None]:
    """An audit's default thresholds against one corpus, and the record they come from.

    A hash-only corpus (no model) gets ``DEFAULT_THRESHOLDS`` (its cosines are never used).
    A corpus indexed before calibration existed gets its model's measured values or, failing
    that, the literature values with a warning to re-run ``splitaudit index``.
    """
    if model_id is None:
        return DEFAULT_THRESHOLDS, None
    record = load_corpus_thresholds(corpus_dir, model_id)
    if record is None:
        if model_id in MODEL_THRESHOLDS:
            record = measured_calibration(model_id, MODEL_THRESHOLDS[model_id], corpus_count=0)
        else:
            log.warning(
                "corpus at %s has no calibrated thresholds for %s; using literature starting "
                "values (run `splitaudit index` on it again to calibrate)",
                corpus_dir,
                model_id,
            )
            record = literature_calibration(
                model_id, corpus_count=0, reason="the corpus has no calibration record"
            )
    base = MODEL_THRESHOLDS.get(model_id, DEFAULT_THRESHOLDS)
    return record.apply(base), record


def calibrate_corpus_thresholds(
    session: Session,
    corpus: Corpus,
    corpus_dir: Path,
    embedder: Embedder | None,
    *,
    force: bool = False,
    prefer_measured: bool = True,
    seed: int = 0,
) -> ThresholdCalibration | None:
    """Derive (or keep) the corpus's threshold record and save it; None for a hash-only corpus.

    ``force`` re-derives a current record; ``prefer_measured=False`` calibrates even a model
    with measured thresholds (to compare the two, as ``bench.calibration`` does).
    """
    model_id = corpus.model_id
    if model_id is None:
        return None
    count = int(
        session.scalar(
            select(func.count())
            .select_from(Item)
            .where(Item.corpus_id == corpus.id, Item.has_embedding.is_(True))
        )
        or 0
    )
    existing = load_corpus_thresholds(corpus_dir, model_id)
    if existing is not None and not force and not _stale(existing, count, model_id, embedder):
        return existing
    started = time.perf_counter()
    if model_id in MODEL_THRESHOLDS and prefer_measured:
        record = measured_calibration(model_id, MODEL_THRESHOLDS[model_id], corpus_count=count)
    else:
        record = _calibrate(
            session, corpus, corpus_dir, embedder, count, np.random.default_rng(seed)
        )
        if (
            record.source == "literature"
            and existing is not None
            and existing.source == "calibrated"
        ):
            return (
                existing  # this run cannot re-measure (no model loaded): keep the measured curves
            )
    record = ThresholdCalibration.from_dict(
        dict(record.to_dict(), seconds=round(time.perf_counter() - started, 3))
    )
    save_thresholds_sidecar(corpus_dir, record.to_dict())
    log.info("thresholds of corpus %s: %s", corpus.name, record.summary())
    return record


def _stale(
    existing: ThresholdCalibration, count: int, model_id: str, embedder: Embedder | None
) -> bool:
    """Whether a saved record should be re-derived now."""
    if existing.source == "measured":
        return model_id not in MODEL_THRESHOLDS
    grown = count >= RECALIBRATE_FACTOR * max(existing.corpus_count, 1)
    # literature values are a last resort: replace them as soon as this run can measure
    can_measure = embedder is not None and embedder.model_id == model_id
    return grown or (existing.source == "literature" and can_measure)


def _calibrate(
    session: Session,
    corpus: Corpus,
    corpus_dir: Path,
    embedder: Embedder | None,
    count: int,
    rng: np.random.Generator,
) -> ThresholdCalibration:
    assert corpus.model_id is not None
    model_id = corpus.model_id
    ids, vectors = _sample_vectors(session, corpus, corpus_dir, rng)
    sides = _min_sides(session, ids)
    # small pairs never get a cosine verdict, so only large (or unknown-size) items count
    large = np.array(
        [(side := sides.get(int(i))) is None or side >= DEFAULT_THRESHOLDS.small_side for i in ids],
        dtype=bool,
    )
    if large.sum() < MIN_COPY_IMAGES:
        # a low-resolution corpus (CIFAR-like): its cosines only nominate candidates for pixel
        # verification, so calibrate on the small items themselves
        large = np.ones(len(ids), dtype=bool)
    pairs = null_cosines(vectors[large], NULL_PAIRS, rng) if len(ids) else np.zeros(0, np.float32)
    if embedder is None or embedder.model_id != model_id:
        reason = (
            f"no image of the corpus was embedded with {model_id} in this run (e.g. "
            "precomputed embeddings without image bytes)"
        )
        return literature_calibration(model_id, corpus_count=count, reason=reason)
    images = _sample_images(session, ids[large], rng, COPY_SAMPLE_IMAGES)
    if len(images) < MIN_COPY_IMAGES:
        reason = (
            f"only {len(images)} large corpus images with readable bytes "
            f"(at least {MIN_COPY_IMAGES} needed to measure copies)"
        )
        return literature_calibration(model_id, corpus_count=count, reason=reason)
    curves = copy_cosines(embedder, images)
    if len(pairs) + len(curves.cross) < MIN_NULL_PAIRS:
        return literature_calibration(
            model_id,
            corpus_count=count,
            reason=f"only {len(pairs) + len(curves.cross)} unrelated pairs (at least {MIN_NULL_PAIRS} needed)",
        )
    return calibrate_from_curves(
        model_id, pairs, curves, corpus_count=count, null_items=int(large.sum())
    )


def _sample_vectors(
    session: Session, corpus: Corpus, corpus_dir: Path, rng: np.random.Generator
) -> tuple[np.ndarray[Any, np.dtype[np.int64]], np.ndarray[Any, np.dtype[np.float32]]]:
    """Ids and stored vectors of up to ``NULL_SAMPLE_ITEMS`` random corpus items."""
    refs = [
        (str(n), int(c))
        for n, c in session.execute(
            select(VectorBatch.name, VectorBatch.count)
            .where(VectorBatch.corpus_id == corpus.id)
            .order_by(VectorBatch.id)
        ).all()
    ]
    total = sum(c for _, c in refs)
    if total == 0:
        return np.empty(0, np.int64), np.empty((0, corpus.embed_dim or 0), np.float32)
    rows = rng.choice(total, min(NULL_SAMPLE_ITEMS, total), replace=False).astype(np.int64)
    return gather_rows(corpus_dir, refs, rows)


def _min_sides(session: Session, ids: np.ndarray[Any, np.dtype[np.int64]]) -> dict[int, int | None]:
    out: dict[int, int | None] = {}
    id_list = [int(i) for i in ids]
    for chunk in in_chunks(id_list):
        for item_id, w, h in session.execute(
            select(Item.id, Item.width, Item.height).where(Item.id.in_(chunk))
        ):
            out[int(item_id)] = min(w, h) if w is not None and h is not None else None
    return out


def _sample_images(
    session: Session,
    ids: np.ndarray[Any, np.dtype[np.int64]],
    rng: np.random.Generator,
    wanted: int,
) -> list[Image.Image]:
    """Up to ``wanted`` decoded corpus images whose bytes are local (never fetched by URL)."""
    order = [int(i) for i in rng.permutation(ids)]
    images: list[Image.Image] = []
    for chunk in in_chunks(order):
        locators = dict(
            session.execute(select(Item.id, Item.locator).where(Item.id.in_(chunk))).all()
        )
        for item_id in chunk:
            loc = locators.get(item_id) or {}
            if loc.get("kind") not in ("file", "tar", "zip"):
                continue
            try:
                images.append(
                    decode_image(Locator.from_dict(loc).read_bytes(), pixels_only=True).image
                )
            except Exception as exc:  # moved or unreadable since indexing: sample another
                log.debug("calibration skips item %s: %s", item_id, exc)
                continue
            if len(images) >= wanted:
                return images
    return images
