"""Matching a split against one corpus: exact, near and semantic candidates, verified and classified."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image
from sqlalchemy import select
from sqlalchemy.orm import Session

from indexer.audit.ingest import SplitState
from indexer.audit.thresholds import Thresholds
from indexer.db.models import Item, SplitItem
from indexer.features.decode import decode_image
from indexer.sources.record import Locator
from indexer.store.corpus_index import CorpusIndex

log = logging.getLogger(__name__)
IN_CHUNK = 500
TOP_K = 10
KIND_RANK = {"exact": 0, "near": 1, "semantic": 2, "label_leak": 3}


@dataclass
class Pair:
    """Evidence gathered for one (split item row, corpus item) pair."""

    row: int
    item_id: int
    sha_equal: bool = False
    pixel_equal: bool = False
    hamming: int | None = None
    mirrored: bool = False
    cosine: float | None = None
    verify: float | None = None
    kind: str | None = None

    def evidence(self) -> dict[str, Any]:
        """What the report shows as the reason for this match."""
        ev: dict[str, Any] = {}
        if self.sha_equal:
            ev["sha256_equal"] = True
        if self.pixel_equal:
            ev["pixel_digest_equal"] = True
        if self.hamming is not None:
            ev["phash_hamming"] = self.hamming
            if self.mirrored:
                ev["mirrored"] = True
        if self.cosine is not None:
            ev["cosine"] = round(self.cosine, 4)
        if self.verify is not None:
            ev["verify_score"] = round(self.verify, 4)
        return ev


@dataclass
class CorpusMatches:
    """The classified pairs of a split against one corpus (each with a kind)."""

    corpus: str
    pairs: list[Pair] = field(default_factory=list)


def match_corpus(
    session: Session,
    *,
    corpus_id: int,
    index: CorpusIndex,
    state: SplitState,
    vectors: npt.NDArray[np.float32] | None,
    thresholds: Thresholds,
) -> CorpusMatches:
    """Find and classify every pair of split item x corpus item that is a duplicate of some kind."""
    pairs: dict[tuple[int, int], Pair] = {}

    def pair(row: int, item_id: int) -> Pair:
        key = (row, item_id)
        if key not in pairs:
            pairs[key] = Pair(row=row, item_id=item_id)
        return pairs[key]

    _exact_pairs(session, corpus_id, state, pair)
    _hash_pairs(index, state, thresholds, pair)
    if vectors is not None and index.floats is not None and len(vectors):
        _vector_pairs(index, vectors, thresholds, pair)
        _fill_cosines(index, vectors, pairs.values())
    _verify_candidates(session, state, pairs.values(), thresholds)
    out = CorpusMatches(corpus=index.corpus)
    for p in pairs.values():
        if p.sha_equal or p.pixel_equal:
            p.kind = "exact"
        else:
            p.kind = thresholds.classify(p.hamming, p.cosine, p.verify)
        if p.kind is not None:
            out.pairs.append(p)
    return out


def _exact_pairs(session: Session, corpus_id: int, state: SplitState, pair: Any) -> None:
    """SHA-256 / pixel-digest equality through the DB indexes (no corpus-sized Python sets)."""
    for column, values, flag in ((Item.sha256, state.sha256, "sha_equal"),
                                 (Item.pixel_digest, state.pixel, "pixel_equal")):
        rows_by_value: dict[str, list[int]] = defaultdict(list)
        for i, v in enumerate(values):
            rows_by_value[v].append(i)
        distinct = list(rows_by_value)
        for start in range(0, len(distinct), IN_CHUNK):
            chunk = distinct[start : start + IN_CHUNK]
            found = session.execute(
                select(Item.id, column).where(Item.corpus_id == corpus_id, column.in_(chunk))
            ).all()
            for item_id, value in found:
                for row in rows_by_value[value]:
                    setattr(pair(row, int(item_id)), flag, True)


def _hash_pairs(index: CorpusIndex, state: SplitState, th: Thresholds, pair: Any) -> None:
    radius = max(th.phash_hamming, th.candidate_hamming)
    for hashes, mirrored in ((state.phash, False), (state.phash_mirror, True)):
        for row, (ids, dists) in enumerate(index.hashes.search_radius(hashes, radius)):
            for item_id, dist in zip(ids.tolist(), dists.tolist(), strict=True):
                p = pair(row, item_id)
                if p.hamming is None or dist < p.hamming:
                    p.hamming, p.mirrored = int(dist), mirrored


def _vector_pairs(index: CorpusIndex, vectors: npt.NDArray[np.float32], th: Thresholds, pair: Any) -> None:
    assert index.floats is not None
    floor = min(th.semantic_cosine, th.near_cosine, th.candidate_cosine)
    for start in range(0, len(vectors), 1024):
        scores, ids = index.floats.search(vectors[start : start + 1024], TOP_K)
        for r in range(len(ids)):
            for score, item_id in zip(scores[r].tolist(), ids[r].tolist(), strict=True):
                if item_id >= 0 and score >= floor:
                    pair(start + r, item_id).cosine = float(score)


def _fill_cosines(index: CorpusIndex, vectors: npt.NDArray[np.float32], pairs: Iterable[Pair]) -> None:
    """Cosine for pairs found by hashes only (reconstructed from the index where it can)."""
    assert index.floats is not None
    for p in pairs:
        if p.cosine is not None:
            continue
        try:
            v = index.floats.index.reconstruct(int(p.item_id))
        except RuntimeError:
            continue  # approximate index without a direct map: no cosine for this pair
        p.cosine = float(np.dot(vectors[p.row], v))


def _verify_candidates(session: Session, state: SplitState, pairs: Iterable[Pair], th: Thresholds) -> None:
    """Run the pixel verifier on candidates that hashes/cosine alone do not decide."""
    from indexer.audit.verify import verify_scores

    todo: dict[int, list[Pair]] = defaultdict(list)
    for p in pairs:
        if p.sha_equal or p.pixel_equal:
            continue
        if th.needs_verify(p.hamming, p.cosine):
            todo[p.row].append(p)
    if not todo:
        return
    item_ids = sorted({p.item_id for ps in todo.values() for p in ps})
    locators = _item_locators(session, Item, item_ids)
    split_locators = _item_locators(session, SplitItem, [int(state.ids[r]) for r in todo])
    cache: dict[int, Image.Image | None] = {}
    for row, ps in todo.items():
        query = _load(split_locators.get(int(state.ids[row])))
        if query is None:
            continue
        cands: list[Image.Image] = []
        kept: list[Pair] = []
        for p in ps:
            if p.item_id not in cache:
                cache[p.item_id] = _load(locators.get(p.item_id))
            img = cache[p.item_id]
            if img is not None:
                cands.append(img)
                kept.append(p)
        if cands:
            for p, score in zip(kept, verify_scores(query, cands).tolist(), strict=True):
                p.verify = float(score)
        if len(cache) > 4096:
            cache.clear()


def _item_locators(session: Session, model: Any, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), IN_CHUNK):
        chunk = list(ids[start : start + IN_CHUNK])
        for row_id, loc in session.execute(select(model.id, model.locator).where(model.id.in_(chunk))):
            out[int(row_id)] = loc
    return out


def _load(locator: dict[str, Any] | None) -> Image.Image | None:
    """Decode an image from a stored locator; None when its bytes are gone or unreadable."""
    if not locator:
        return None
    try:
        return decode_image(Locator(**locator).read_bytes()).image
    except Exception as exc:  # missing source or undecodable: the pair keeps its other evidence
        log.info("cannot load %s for verification: %s", locator, exc)
        return None


def split_duplicates(
    state: SplitState, vectors: npt.NDArray[np.float32] | None, th: Thresholds
) -> list[tuple[int, int, str, float | None, int | None]]:
    """Pairs of split rows (i < j) that duplicate each other: (i, j, kind, cosine, hamming)."""
    import faiss

    from indexer.store.binary_index import hashes_to_bytes

    found: dict[tuple[int, int], dict[str, Any]] = {}
    for values in (state.sha256, state.pixel):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, v in enumerate(values):
            groups[v].append(i)
        for rows in groups.values():
            for a in range(len(rows)):
                for b in range(a + 1, len(rows)):
                    found.setdefault((rows[a], rows[b]), {})["exact"] = True
    n = len(state)
    if n > 1:
        bindex = faiss.IndexBinaryFlat(64)
        bindex.add(hashes_to_bytes(state.phash))
        for hashes in (state.phash, state.phash_mirror):
            lims, dists, ids = bindex.range_search(hashes_to_bytes(hashes), th.phash_hamming + 1)
            for i in range(n):
                for j, d in zip(ids[lims[i] : lims[i + 1]].tolist(), dists[lims[i] : lims[i + 1]].tolist(), strict=True):
                    if i != j:
                        key = (min(i, j), max(i, j))
                        ev = found.setdefault(key, {})
                        ev["hamming"] = min(int(d), ev.get("hamming", 64))
        if vectors is not None and len(vectors) == n:
            findex = faiss.IndexFlatIP(vectors.shape[1])
            findex.add(np.ascontiguousarray(vectors))
            lims, sims, ids = findex.range_search(np.ascontiguousarray(vectors), float(th.semantic_cosine))
            for i in range(n):
                for j, c in zip(ids[lims[i] : lims[i + 1]].tolist(), sims[lims[i] : lims[i + 1]].tolist(), strict=True):
                    if i < j:
                        found.setdefault((i, j), {})["cosine"] = float(c)
    out = []
    for (i, j), ev in sorted(found.items()):
        kind = "exact" if ev.get("exact") else th.classify(ev.get("hamming"), ev.get("cosine"), None)
        if kind is not None:
            out.append((i, j, kind, ev.get("cosine"), ev.get("hamming")))
    return out
