"""Per-image features (cached) and per-pair score matrices for the accuracy benchmark."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from bench.accuracy.dataset import DATASET_VERSION, Dataset, Item
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.match import border_trim, verify
from splitaudit.indexer.match.geometric_tier import GeometricTier, shortlist, zoom_in_mask
from splitaudit.indexer.match.geometry import geometric_match
from splitaudit.indexer.match.pair_search import TOP_K
from splitaudit.indexer.match.thresholds import Thresholds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageTable:
    """Features of a list of items, row-aligned with it."""

    ids: tuple[str, ...]
    model_id: str
    min_side: npt.NDArray[np.int32]  # short side of the decoded image, pixels
    phash: npt.NDArray[np.uint64]
    phash_mirror: npt.NDArray[np.uint64]
    dhash: npt.NDArray[np.uint64]
    imagededup_phash: npt.NDArray[np.uint64]
    embedding: npt.NDArray[np.float32]
    thumbnail: npt.NDArray[np.uint8]


@dataclass(frozen=True)
class PairScores:
    """(n_queries, n_corpus) score matrices: one row per query, one column per corpus item."""

    phash_hamming: npt.NDArray[np.int16]  # min over the query and its mirror
    dhash_hamming: npt.NDArray[np.int16]
    cosine: npt.NDArray[np.float32]
    imagededup_hamming: npt.NDArray[np.int16]
    verify: npt.NDArray[np.float32]
    min_side: npt.NDArray[np.int32]  # smaller short side of the two images
    verify_pairs_per_s: float
    # Geometric support (inliers of a plausible transform) where the engine would run the
    # geometric match, NaN elsewhere; filled by ``compute_geometry``.
    geometry: npt.NDArray[np.float32] | None = None
    geometry_pairs_per_s: float = 0.0
    nominated: npt.NDArray[np.bool_] | None = None  # the engine's top-k candidates


def _hamming_matrix(a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64]) -> npt.NDArray[np.int16]:
    """All-pairs Hamming distances of two uint64 hash vectors."""
    return np.bitwise_count(a[:, None] ^ b[None, :]).astype(np.int16)


@lru_cache(maxsize=1)
def _imagededup_encoder() -> Any:
    """imagededup's PHash encoder (imported lazily: a bench-only dependency)."""
    from imagededup.methods import PHash

    return PHash(verbose=False)


def _imagededup_hash(path: Path) -> int:
    """imagededup's PHash of a file, exactly as its users compute it, as an int. Without
    imagededup installed (a bench-only dependency), a stand-in that matches nothing (bits of
    the file's SHA-256): the imagededup column then reads 0 found, every other one is exact."""
    try:
        encoder = _imagededup_encoder()
    except ImportError:
        _warn_no_imagededup()
        return int.from_bytes(hashlib.sha256(path.read_bytes()).digest()[:8], "big")
    return int(encoder.encode_image(image_file=str(path)), 16)


@lru_cache(maxsize=1)
def _warn_no_imagededup() -> None:
    log.warning("imagededup is not installed: its PHash column is not measured in this run")


def _cache_key(model: str, ids: list[str]) -> str:
    """Names a feature cache: dataset recipe, model, verify parameters and the item list."""
    trim = f"{border_trim.TOLERANCE}/{border_trim.MAX_SHARE}"
    recipe = f"{DATASET_VERSION}|{model}|{verify.THUMB_SIZE}|v2|{trim}|" + ",".join(ids)
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def compute_table(dataset: Dataset, items: list[Item], model: str, cache_dir: Path) -> ImageTable:
    """Features of ``items`` (hashes, imagededup hash, embedding, verify thumbnail), cached."""
    ids = [item.id for item in items]
    cache = cache_dir / f"features-{_cache_key(model, ids)}.npz"
    if cache.is_file():
        data = np.load(cache)
        return ImageTable(
            tuple(ids),
            str(data["model_id"]),
            data["min_side"],
            data["phash"],
            data["phash_mirror"],
            data["dhash"],
            data["imagededup_phash"],
            data["embedding"],
            data["thumbnail"],
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from splitaudit.indexer.embed.loader import load_embedder

    embedder = load_embedder(model)
    started = time.perf_counter()
    hashes = np.zeros((len(items), 4), np.uint64)
    sides = np.zeros(len(items), np.int32)
    thumbs = np.zeros((len(items), verify.THUMB_SIZE, verify.THUMB_SIZE), np.uint8)
    embeddings = np.zeros((len(items), embedder.dim), np.float32)
    batch: list[Image.Image] = []
    for i, item in enumerate(items):
        path = dataset.path(item)
        features, image = extract_features(path.read_bytes(), keep_image=True)
        assert image is not None
        hashes[i] = (features.phash, features.phash_mirror, features.dhash, _imagededup_hash(path))
        sides[i] = min(features.width, features.height)
        thumbs[i] = verify.verify_thumbnail(image)
        batch.append(image)
        if len(batch) == 64 or i == len(items) - 1:
            embeddings[i + 1 - len(batch) : i + 1] = embedder.embed(batch)
            batch = []
            log.info("features: %d / %d images", i + 1, len(items))
    log.info("features of %d images in %.0f s", len(items), time.perf_counter() - started)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.savez(
        cache,
        model_id=np.array(embedder.model_id),
        min_side=sides,
        phash=hashes[:, 0],
        phash_mirror=hashes[:, 1],
        dhash=hashes[:, 2],
        imagededup_phash=hashes[:, 3],
        embedding=embeddings,
        thumbnail=thumbs,
    )
    return ImageTable(
        tuple(ids),
        embedder.model_id,
        sides,
        hashes[:, 0],
        hashes[:, 1],
        hashes[:, 2],
        hashes[:, 3],
        embeddings,
        thumbs,
    )


def compute_pair_scores(
    dataset: Dataset,
    queries: list[Item],
    query_table: ImageTable,
    corpus_table: ImageTable,
    thresholds: Thresholds,
) -> PairScores:
    """Every (query, corpus) score; verification is run on all pairs so its curve is complete,
    its zoom-in search on the pairs the engine runs it on (``zoom_in_mask``)."""
    phash = np.minimum(
        _hamming_matrix(query_table.phash, corpus_table.phash),
        _hamming_matrix(query_table.phash_mirror, corpus_table.phash),
    )
    dhash = _hamming_matrix(query_table.dhash, corpus_table.dhash)
    cosine = (query_table.embedding @ corpus_table.embedding.T).astype(np.float32)
    imagededup = _hamming_matrix(query_table.imagededup_phash, corpus_table.imagededup_phash)
    scores = np.zeros(cosine.shape, np.float32)
    started = time.perf_counter()
    references = verify.prepare_references(corpus_table.thumbnail)
    elapsed = time.perf_counter() - started
    min_side = np.minimum(query_table.min_side[:, None], corpus_table.min_side[None, :])
    # The engine's call: the query's <=256 px decode against the candidates' stored thumbnails.
    for i, item in enumerate(queries):
        _, image = extract_features(dataset.path(item).read_bytes(), keep_image=True)
        assert image is not None
        started = time.perf_counter()
        zoom = zoom_in_mask(cosine[i].tolist(), min_side[i].tolist(), thresholds)
        scores[i] = verify.verify_scores(image, references, zoom)
        elapsed += time.perf_counter() - started
    return PairScores(
        phash, dhash, cosine, imagededup, scores, min_side, scores.size / max(elapsed, 1e-9)
    )


def nominated_pairs(
    cosine: npt.NDArray[np.float32],
    hamming: npt.NDArray[np.int16] | None = None,
    candidate_hamming: int = 20,
    k: int = TOP_K,
) -> npt.NDArray[np.bool_]:
    """The engine's candidates: each query's ``k`` highest-cosine corpus items and, given the
    pHash distances, its ``k`` nearest pHashes within ``candidate_hamming`` (every test image
    asks for both, ``pair_search.hash_pairs``)."""
    mask = np.zeros(cosine.shape, bool)
    np.put_along_axis(mask, np.argsort(-cosine, axis=1)[:, :k], True, axis=1)
    if hamming is not None:
        by_hash = np.zeros(cosine.shape, bool)
        np.put_along_axis(by_hash, np.argsort(hamming, axis=1, kind="stable")[:, :k], True, axis=1)
        mask |= by_hash & (hamming <= candidate_hamming)
    return mask


def compute_geometry(
    dataset: Dataset,
    queries: list[Item],
    corpus: list[Item],
    scores: PairScores,
    thresholds: Thresholds,
) -> PairScores:
    """Geometric support of the pairs the engine would match geometrically (its shortlist).

    Per query: the top-``TOP_K`` corpus items by cosine and by pHash (``nominated_pairs``), not
    already near by hash or verification, large, cosine >= ``candidate_cosine``, capped as
    the engine caps them; and the large pairs already near by hash or verification, which the
    engine confirms (``geometric_tier.shortlist``: a refused overlay fit vetoes them). Images are decoded as the engine decodes them (short side <= 256).
    """
    nominated = nominated_pairs(scores.cosine, scores.phash_hamming, thresholds.candidate_hamming)
    settled = thresholds.near_mask(
        scores.phash_hamming, scores.cosine, scores.verify, scores.min_side
    )
    geometry = np.full(scores.cosine.shape, np.nan, np.float32)
    tier = GeometricTier()

    def load(j: int) -> Image.Image:
        return decode_image(dataset.path(corpus[j]).read_bytes()).image

    for i, item in enumerate(queries):
        # the engine's candidates: vector top-k, and the pairs near by hash (which it confirms)
        cols = np.flatnonzero(nominated[i] | settled[i])
        picked = shortlist(
            scores.cosine[i, cols].tolist(),
            settled[i, cols].tolist(),
            scores.min_side[i, cols].tolist(),
            thresholds,
        )
        if not picked:
            continue
        chosen = [int(cols[n]) for n in picked]
        query = decode_image(dataset.path(item).read_bytes()).image
        for j, match in zip(chosen, tier.match(query, chosen, load), strict=True):
            geometry[i, j] = match.support
        if i % 100 == 0:
            log.info("geometry: query %d / %d, %d pairs so far", i, len(queries), tier.pairs)
    log.info("geometry: %d pairs in %.1f s", tier.pairs, tier.seconds)
    return replace(
        scores,
        geometry=geometry,
        geometry_pairs_per_s=tier.pairs / max(tier.seconds, 1e-9),
        nominated=nominated,
    )


def probe_geometry(dataset: Dataset, probes: list[Item]) -> npt.NDArray[np.float32]:
    """Geometric support of each photo's right half (as the test image) against its left half.

    Same scene, no shared pixels: a hard negative for the geometric match.
    """
    by_photo: dict[str, dict[str, Item]] = {}
    for item in probes:
        by_photo.setdefault(item.photo, {})[item.transform] = item
    support = []
    for halves in by_photo.values():
        if {"left", "right"} <= set(halves):
            left, right = (
                decode_image(dataset.path(halves[side]).read_bytes()).image
                for side in ("left", "right")
            )
            support.append(geometric_match(right, left).support)
    return np.asarray(support, np.float32)
