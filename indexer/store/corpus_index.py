"""A corpus's FAISS stores, brought up to date with the DB on open (crash-safe catch-up).

Indexing only writes DB rows and vector batch files; the FAISS indexes are derived data.
``sync_corpus_index`` loads the saved indexes, adds whatever committed rows/batches are
newer than their sidecars, and saves them atomically. A run killed at any point therefore
never leaves the indexes missing or duplicating an item. The index *type* follows the size
(``IndexPolicy``): when the corpus outgrows exact Flat search (or an IVF outgrows its list
count, or another storage is asked for) the index is rebuilt from the batch files, streaming;
a saved index that cannot be read is rebuilt the same way.
"""

from __future__ import annotations

import fcntl
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sqlalchemy import select
from sqlalchemy.orm import Session

from splitaudit.indexer.db.models import Corpus, Item, VectorBatch
from splitaudit.indexer.db.queries import in_chunks, item_values_after, max_item_id
from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store import binary_index, float_index
from splitaudit.indexer.store.binary_index import BinaryStore, signed_to_unsigned
from splitaudit.indexer.store.calibrate import (
    BatchRef,
    flip_bits,
    hamming_recall,
    iter_chunks,
    knn_within_recall,
)
from splitaudit.indexer.store.float_build import (
    build_flat,
    build_ivf,
    extend_ondisk,
    recalibrate_ivf,
)
from splitaudit.indexer.store.float_index import FloatStore
from splitaudit.indexer.store.hamming_mih import MAX_EXACT_RADIUS
from splitaudit.indexer.store.policy import IndexPolicy, resolve_storage
from splitaudit.indexer.store.shape_index import ShapeStore, sync_shapes
from splitaudit.indexer.store.sidecar import Sidecar
from splitaudit.indexer.store.vectors import VECTORS_DIR

log = logging.getLogger(__name__)
_HASH_CHUNK = 200_000
ORPHAN_AGE_S = 3600.0


@dataclass
class CorpusIndex:
    """The loaded stores of one corpus (``floats`` is None for a hash-only corpus)."""

    corpus: str
    generation: int
    hashes: BinaryStore
    floats: FloatStore | None
    # the thumbnails' shape descriptors (``shape_index``); None: not loaded (a dedup's joined
    # stand-in index), so no small test image is nominated by shape
    shapes: ShapeStore | None = None

    def info(self) -> dict[str, object]:
        """What a report records about the index used."""
        out: dict[str, object] = {
            "corpus": self.corpus,
            "generation": self.generation,
            "hash_count": self.hashes.count,
            "hash_index": self.hashes.index_type,
        }
        if self.floats is not None:
            out.update(
                vector_count=self.floats.count,
                vector_index=self.floats.index_type,
                model_id=self.floats.model_id,
                dim=self.floats.dim,
            )
            if "nprobe" in self.floats.params:
                out.update(
                    nprobe=self.floats.params["nprobe"],
                    recall_at_10=self.floats.params.get("recall_at_10"),
                )
        if self.shapes is not None:
            out["shape_count"] = self.shapes.count
        return out


@contextmanager
def corpus_lock(corpus_dir: Path) -> Iterator[None]:
    """An exclusive advisory lock so two processes never sync one corpus at once."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    with open(corpus_dir / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sync_corpus_index(
    session: Session, corpus: Corpus, corpus_dir: Path, policy: IndexPolicy | None = None
) -> CorpusIndex:
    """Load the corpus's stores, add committed rows newer than their sidecars, save if changed."""
    policy = policy or IndexPolicy()
    with corpus_lock(corpus_dir):
        hashes = _sync_hashes(session, corpus, corpus_dir, policy)
        floats = _sync_floats(session, corpus, corpus_dir, policy) if corpus.model_id else None
        shapes = sync_shapes(session, corpus, corpus_dir)
    return CorpusIndex(
        corpus=corpus.name,
        generation=corpus.generation,
        hashes=hashes,
        floats=floats,
        shapes=shapes,
    )


def _check_generation(saved: int, corpus: Corpus, path: Path) -> None:
    if saved > corpus.generation:
        raise IndexMismatchError(
            f"{path} was built at generation {saved} but the database of corpus "
            f"{corpus.name!r} is at {corpus.generation}: it belongs to another database; "
            f"delete {path.parent} and run `splitaudit index` again"
        )


def _read_sidecar(path: Path) -> Sidecar | None:
    """The saved sidecar, or None (rebuild) when it is missing or unreadable."""
    if not path.exists():
        return None
    try:
        return Sidecar.load(path)
    except IndexMismatchError as exc:
        log.warning("%s; rebuilding the index from the database", exc)
        return None


def _sync_hashes(
    session: Session, corpus: Corpus, folder: Path, policy: IndexPolicy
) -> BinaryStore:
    side = _read_sidecar(folder / binary_index.SIDECAR_FILE)
    store = BinaryStore.create()
    if side is not None:
        side.check(
            kind="binary",
            model_id=binary_index.HASH_MODEL,
            dim=64,
            metric=binary_index.METRIC,
            path=folder / binary_index.SIDECAR_FILE,
        )
        _check_generation(side.generation, corpus, folder / binary_index.SIDECAR_FILE)
        try:
            store = BinaryStore.load(folder)
        except IndexMismatchError as exc:
            log.warning("%s; rebuilding the hash index from the database", exc)
    max_id = max_item_id(session, corpus.id)
    added = 0
    start = store.max_item_id
    for rows in item_values_after(session, corpus.id, Item.phash, start, max_id, _HASH_CHUNK):
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        store.add(ids, signed_to_unsigned(np.fromiter((r[1] for r in rows), np.int64, len(rows))))
        added += len(rows)
    retyped = _retype_hashes(store, policy)
    if (
        added
        or retyped
        or store.generation != corpus.generation
        or not (folder / binary_index.INDEX_FILE).exists()
    ):
        store.save(folder, generation=corpus.generation, max_item_id=max(max_id, store.max_item_id))
        log.info(
            "hash index of %s: +%d (total %d, %s)",
            corpus.name,
            added,
            store.count,
            store.index_type,
        )
    return store


def _retype_hashes(store: BinaryStore, policy: IndexPolicy) -> bool:
    """Multi-index hashing on/off by size; measure its recall when switched on or grown. True if changed."""
    want = store.count >= policy.hash_flat_max
    had = store.index_type == binary_index.MIH_TYPE
    if not want:
        if had:
            store.use_mih(False)
            store.params = {}
        return had
    store.use_mih(True)  # (re)builds the in-memory tables when missing or stale
    calibrated = int(store.params.get("calibrated_count", 0) or 0)
    same_knn = (
        store.params.get("knn_exact_radius") == policy.hash_knn_radius
        and store.params.get("knn_candidate_radius") == policy.hash_candidate_radius
    )
    if had and calibrated and same_knn and store.count < calibrated * policy.recalibrate_factor:
        return False
    rng = np.random.default_rng(policy.seed)
    codes, _ = store.codes_and_ids()
    sample = codes[
        rng.choice(len(codes), min(policy.calibration_queries, len(codes)), replace=False)
    ]
    queries = flip_bits(sample, MAX_EXACT_RADIUS, rng)
    assert store.mih is not None
    recall = hamming_recall(
        store.mih.search_radius, partial(_brute_radius, store), queries, MAX_EXACT_RADIUS
    )
    store.params = {
        "mih_blocks": 3,
        "max_exact_radius": MAX_EXACT_RADIUS,
        "recall": round(recall, 4),
        "recall_radius": MAX_EXACT_RADIUS,
        "recall_queries": len(queries),
        "calibrated_count": store.count,
        "knn_exact_radius": policy.hash_knn_radius,
    }
    # the verification candidates' search, against the exhaustive k-NN within the candidate
    # radius on the same queries (corpus hashes with up to MAX_EXACT_RADIUS bits flipped)
    k, cand = policy.calibration_k, policy.hash_candidate_radius
    at_k, at_1 = knn_within_recall(
        store.search_knn_within(queries, k, cand),
        BinaryStore.search_knn_within(_flat_view(store), queries, k, cand),
    )
    store.params.update(
        knn_k=k,
        knn_candidate_radius=cand,
        knn_recall=round(at_k, 4),
        knn_recall_at_1=round(at_1, 4),
    )
    log.info(
        "hash index: multi-index hashing, recall %.4f at radius <= %d vs brute force; "
        "%d nearest within %d bits (exact within %d): recall %.4f, nearest %.4f",
        recall,
        MAX_EXACT_RADIUS,
        k,
        cand,
        policy.hash_knn_radius,
        at_k,
        at_1,
    )
    return True


def _flat_view(store: BinaryStore) -> BinaryStore:
    """The same FAISS index without hash tables: the exhaustive reference."""
    return BinaryStore(store.index)


def _brute_radius(
    store: BinaryStore, q: npt.NDArray[np.uint64], radius: int
) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]]:
    """Exhaustive FAISS range search (the reference multi-index hashing is measured against)."""
    lims, dists, ids = store.index.range_search(binary_index.hashes_to_bytes(q), radius + 1)
    return [(ids[lims[i] : lims[i + 1]], dists[lims[i] : lims[i + 1]]) for i in range(len(q))]


def _batch_refs(session: Session, corpus: Corpus, after: int = 0) -> list[tuple[int, str, int]]:
    return [
        (int(i), str(n), int(c))
        for i, n, c in session.execute(
            select(VectorBatch.id, VectorBatch.name, VectorBatch.count)
            .where(VectorBatch.corpus_id == corpus.id, VectorBatch.id > after)
            .order_by(VectorBatch.id)
        ).all()
    ]


def _sync_floats(session: Session, corpus: Corpus, folder: Path, policy: IndexPolicy) -> FloatStore:
    assert corpus.model_id is not None and corpus.embed_dim is not None
    model_id, dim = corpus.model_id, corpus.embed_dim
    path = folder / float_index.SIDECAR_FILE
    side = _read_sidecar(path)
    if side is not None:
        side.check(kind="float", model_id=model_id, dim=dim, metric=float_index.METRIC, path=path)
        _check_generation(side.generation, corpus, path)
    new = _batch_refs(session, corpus, side.last_batch_id if side else 0)
    total = (side.count if side else 0) + sum(c for _, _, c in new)
    storage = resolve_storage(policy.storage, side.params.get("ivf_storage") if side else None)
    store: FloatStore | None = None
    if side is not None and not _needs_rebuild(side, total, storage, policy):
        fresh = not new and side.generation == corpus.generation
        try:
            store = FloatStore.load(folder, model_id=model_id, dim=dim, mmap=fresh and policy.mmap)
        except IndexMismatchError as exc:
            log.warning("%s; rebuilding the vector index from the batch files", exc)
        if store is not None and fresh:
            _remove_orphan_batches(session, corpus, folder)
            return store
        if store is not None and store.is_ondisk:
            try:
                extend_ondisk(store, folder, _refs(new), policy)
                if new:
                    store.last_batch_id = new[-1][0]
            except IndexMismatchError as exc:
                log.warning("%s; rebuilding the vector index from the batch files", exc)
                store = None
        elif store is not None:
            _add_batches(store, folder, new)
        if store is not None:
            calibrated = int(store.params.get("calibrated_count", 0) or 0)
            if not store.is_exact and store.count >= calibrated * policy.recalibrate_factor:
                recalibrate_ivf(store, folder, _refs(_batch_refs(session, corpus)), policy)
    if store is None:
        every = _batch_refs(session, corpus)
        refs = _refs(every)
        if policy.wants_ivf(sum(c for _, c in refs)):
            store = build_ivf(
                folder, refs, model_id=model_id, dim=dim, storage=storage, policy=policy
            )
        else:
            store = build_flat(folder, refs, model_id=model_id, dim=dim)
        store.last_batch_id = every[-1][0] if every else 0
    store.params["ivf_storage"] = storage
    store.save(folder, generation=corpus.generation, last_batch_id=store.last_batch_id)
    log.info("vector index of %s: %d vectors (%s)", corpus.name, store.count, store.index_type)
    _remove_orphan_batches(session, corpus, folder)
    return store


def _refs(rows: list[tuple[int, str, int]]) -> list[BatchRef]:
    return [(name, count) for _, name, count in rows]


def _needs_rebuild(side: Sidecar, total: int, storage: str, policy: IndexPolicy) -> bool:
    """Whether the saved index no longer fits: outgrew Flat, outgrew its IVF lists, other storage."""
    if side.index_type == float_index.FLAT_TYPE:
        return policy.wants_ivf(total)
    if side.params.get("storage") != storage:
        return True
    built_for = int(side.params.get("built_for", side.count) or 1)
    return total >= policy.regrow_factor * built_for


def _add_batches(store: FloatStore, folder: Path, new: list[tuple[int, str, int]]) -> None:
    """Add new batch files (chunked) and advance ``last_batch_id``."""
    for ids, vecs in iter_chunks(folder, _refs(new)):
        store.add(ids, vecs)
    if new:
        store.last_batch_id = new[-1][0]


def _remove_orphan_batches(session: Session, corpus: Corpus, folder: Path) -> None:
    """Delete batch files whose DB row was never committed (a run killed mid-batch)."""
    vec_dir = folder / VECTORS_DIR
    if not vec_dir.is_dir():
        return
    on_disk = {p.stem: p for p in vec_dir.glob("*.npz")}
    if not on_disk:
        return
    known: set[str] = set()
    for chunk in in_chunks(list(on_disk)):
        known.update(
            session.scalars(select(VectorBatch.name).where(VectorBatch.name.in_(chunk))).all()
        )
    cutoff = time.time() - ORPHAN_AGE_S
    for name, path in on_disk.items():
        # Young files may belong to a batch another process is committing right now.
        if name not in known and path.stat().st_mtime < cutoff:
            log.info("removing orphan vector batch %s", path)
            path.unlink(missing_ok=True)
