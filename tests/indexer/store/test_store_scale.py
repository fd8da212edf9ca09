"""Index types by size: Flat -> IVF rebuild with calibrated nprobe, storage options, mmap, MIH hashes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, Item, VectorBatch
from splitaudit.indexer.db.queries import ensure_corpus, ensure_shard
from splitaudit.indexer.store.binary_index import MIH_TYPE
from splitaudit.indexer.store.corpus_index import CorpusIndex, sync_corpus_index
from splitaudit.indexer.store.exact import exact_search, recall_at_k
from splitaudit.indexer.store.policy import IndexPolicy
from splitaudit.indexer.store.vectors import batch_path, write_batch
from splitaudit.indexer.workspace import Workspace

DIM = 32
SMALL = IndexPolicy(flat_max=1000, hash_flat_max=500, calibration_queries=200)


def clustered(rng: np.random.Generator, n: int, centers: np.ndarray) -> np.ndarray:
    """Unit vectors around random centres (embeddings have neighbourhoods; uniform noise has none)."""
    x = centers[rng.integers(0, len(centers), n)] + 0.6 * rng.standard_normal((n, DIM)) / np.sqrt(
        DIM
    )
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Corpus_:
    """A corpus with items and vector batches written the way the indexing pipeline writes them."""

    def __init__(self, home: Path, seed: int = 0) -> None:
        self.ws = Workspace.open(home)
        self.rng = np.random.default_rng(seed)
        self.centers = self.rng.standard_normal((40, DIM)).astype(np.float32)
        self.vectors: dict[int, np.ndarray] = {}
        self.hashes: dict[int, int] = {}
        with transaction(self.ws.sessions) as s:
            corpus = ensure_corpus(s, name="c", model_id="m", dim=DIM)
            self.corpus_id = corpus.id
            self.shard_id = ensure_shard(s, corpus=corpus, source="syn", name="s").id

    def add(self, n: int, batch: int = 300) -> None:
        for start in range(0, n, batch):
            m = min(batch, n - start)
            vecs = clustered(self.rng, m, self.centers)
            hashes = self.rng.integers(-(2**63), 2**63 - 1, m, dtype=np.int64)
            with transaction(self.ws.sessions) as s:
                items = [
                    Item(
                        corpus_id=self.corpus_id,
                        shard_id=self.shard_id,
                        key=uuid.uuid4().hex,
                        phash=int(h),
                        has_embedding=True,
                    )
                    for h in hashes
                ]
                s.add_all(items)
                s.flush()
                ids = np.array([it.id for it in items], np.int64)
                name = uuid.uuid4().hex
                write_batch(batch_path(self.dir, name), ids, vecs)
                s.add(VectorBatch(corpus_id=self.corpus_id, name=name, count=m))
                s.execute(
                    update(Corpus)
                    .where(Corpus.id == self.corpus_id)
                    .values(generation=Corpus.generation + 1)
                )
            self.vectors.update(zip(ids.tolist(), vecs, strict=True))
            self.hashes.update(
                zip(ids.tolist(), (int(h) & (2**64 - 1) for h in hashes), strict=True)
            )

    @property
    def dir(self) -> Path:
        return self.ws.corpus_dir("c")

    def sync(self, policy: IndexPolicy = SMALL) -> CorpusIndex:
        with self.ws.sessions() as s:
            return sync_corpus_index(s, s.get_one(Corpus, self.corpus_id), self.dir, policy)

    def sidecar(self, name: str = "embeddings.json") -> dict:
        return json.loads((self.dir / name).read_text())

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        ids = np.array(sorted(self.vectors), np.int64)
        return ids, np.stack([self.vectors[i] for i in ids.tolist()])


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus_:
    return Corpus_(tmp_path / "home")


def test_flat_below_threshold_then_ivf_rebuild_records_recall(corpus: Corpus_) -> None:
    corpus.add(900)
    idx = corpus.sync()
    assert idx.floats is not None and idx.floats.index_type == "Flat" and idx.floats.count == 900
    corpus.add(1500)
    idx = corpus.sync()
    floats = idx.floats
    assert floats is not None and floats.count == 2400
    side = corpus.sidecar()
    assert side["index_type"] == "IVF64,SQfp16" and side["count"] == 2400
    params = side["params"]
    assert params["recall_at_10"] >= SMALL.recall_target
    assert 1 <= params["nprobe"] <= 64 and params["calibration_queries"] == 200
    assert params["built_for"] == 2400 and params["nprobe_curve"][-1][1] >= SMALL.recall_target
    # every item is in the index exactly once, under its DB id, and can be reconstructed
    ids, base = corpus.matrix()
    some = ids[[0, 1000, 2399]]
    for item_id in some.tolist():
        np.testing.assert_allclose(
            floats.index.reconstruct(item_id), corpus.vectors[item_id], atol=2e-3
        )
    scores, found = floats.search(base[[0, 1000, 2399]], 3)
    assert found[:, 0].tolist() == some.tolist() and np.all(scores[:, 0] > 0.99)


def test_ivf_recall_on_fresh_queries_matches_exact_search(corpus: Corpus_) -> None:
    # fp32 lists: at dim 32 the 10th/11th neighbours differ by ~1e-4, below fp16's rounding
    corpus.add(3000)
    floats = corpus.sync(IndexPolicy(flat_max=1000, calibration_queries=200, storage="fp32")).floats
    assert floats is not None and floats.index_type.startswith("IVF")
    ids, base = corpus.matrix()
    queries = clustered(np.random.default_rng(99), 300, corpus.centers)
    _, truth = exact_search(queries, base, ids, 10)
    _, found = floats.search(queries, 10)
    assert recall_at_k(found, truth) >= 0.98


def test_ivf_grows_incrementally_then_rebuilds_when_outgrown(corpus: Corpus_) -> None:
    corpus.add(1200)
    corpus.sync()
    corpus.add(500)  # < 1.5x: added to the lists, no recalibration
    floats = corpus.sync().floats
    assert floats is not None and floats.count == 1700
    assert corpus.sidecar()["params"]["built_for"] == 1200
    assert corpus.sidecar()["params"]["calibrated_count"] == 1200
    corpus.add(700)  # 2400 >= 1.5 x 1200: recalibrated, same lists
    assert corpus.sync().floats.count == 2400  # type: ignore[union-attr]
    assert corpus.sidecar()["params"]["calibrated_count"] == 2400
    assert corpus.sidecar()["params"]["built_for"] == 1200
    corpus.add(2500)  # >= 4 x 1200: rebuilt
    assert corpus.sync().floats.count == 4900  # type: ignore[union-attr]
    assert corpus.sidecar()["params"]["built_for"] == 4900


@pytest.mark.parametrize("storage", ["fp16", "sq8", "fp32"])
def test_list_by_list_search_equals_faiss_search(corpus: Corpus_, storage: str) -> None:
    corpus.add(2000)
    floats = corpus.sync(
        IndexPolicy(flat_max=1000, calibration_queries=100, storage=storage)
    ).floats  # type: ignore[arg-type]
    assert floats is not None
    queries = clustered(np.random.default_rng(4), 1500, corpus.centers)  # enough to batch by list
    assert len(queries) * floats.index.nprobe >= 64 * floats.index.nlist
    scores, ids = floats.search(queries, 10)
    want_s, want_i = floats.index.search(queries, 10)
    assert recall_at_k(ids, want_i) >= 0.999
    np.testing.assert_allclose(scores[:, 0], want_s[:, 0], atol=1e-4)


def test_list_scan_threads_give_the_same_answer(
    corpus: Corpus_, monkeypatch: pytest.MonkeyPatch
) -> None:
    from splitaudit.indexer.store import float_index

    corpus.add(2000)
    floats = corpus.sync(IndexPolicy(flat_max=1000, calibration_queries=100)).floats
    assert floats is not None
    floats.index.nprobe = 16
    queries = clustered(np.random.default_rng(5), 1500, corpus.centers)
    answers = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(float_index, "SCAN_THREADS", threads)
        answers.append(floats._search_by_list(queries, 10))
    want_s, want_i = floats.index.search(queries, 10)
    for scores, ids in answers:  # (tied scores may come in another order)
        np.testing.assert_array_equal(np.sort(ids, axis=1), np.sort(answers[0][1], axis=1))
        np.testing.assert_array_equal(scores, answers[0][0])
        # every rank, not just the best: rows skipped by the k-th best filter lose nothing
        np.testing.assert_allclose(scores, want_s, atol=1e-4)
        assert recall_at_k(ids, want_i) >= 0.999


def test_storage_options_are_kept_until_changed(corpus: Corpus_) -> None:
    corpus.add(1500)
    sq8 = IndexPolicy(flat_max=1000, calibration_queries=100, storage="sq8")
    assert corpus.sync(sq8).floats.index_type == "IVF64,SQ8"  # type: ignore[union-attr]
    corpus.add(100)
    auto = IndexPolicy(flat_max=1000, calibration_queries=100)
    assert corpus.sync(auto).floats.index_type == "IVF64,SQ8"  # type: ignore[union-attr]
    fp32 = IndexPolicy(flat_max=1000, calibration_queries=100, storage="fp32")
    floats = corpus.sync(fp32).floats
    assert floats is not None and floats.index_type == "IVF64,Flat" and floats.count == 1600
    assert corpus.sidecar()["params"]["recall_at_10"] >= 0.99


def test_up_to_date_index_is_served_memory_mapped(corpus: Corpus_) -> None:
    import faiss

    corpus.add(1500)
    built = corpus.sync().floats
    served = corpus.sync().floats
    assert built is not None and served is not None
    lists = faiss.downcast_InvertedLists(served.index.invlists)
    assert isinstance(lists, faiss.OnDiskInvertedLists)
    q = clustered(np.random.default_rng(5), 20, corpus.centers)
    assert np.array_equal(built.search(q, 5)[1], served.search(q, 5)[1])
    item_id = next(iter(corpus.vectors))
    np.testing.assert_allclose(
        served.index.reconstruct(item_id), corpus.vectors[item_id], atol=2e-3
    )
    no_mmap = corpus.sync(IndexPolicy(flat_max=1000, calibration_queries=200, mmap=False)).floats
    assert no_mmap is not None
    assert isinstance(
        faiss.downcast_InvertedLists(no_mmap.index.invlists), faiss.ArrayInvertedLists
    )


def test_flat_memory_mapped_search_equals_exact(corpus: Corpus_) -> None:
    corpus.add(500)
    corpus.sync()
    served = corpus.sync().floats
    assert served is not None and served.index_type == "Flat"
    ids, base = corpus.matrix()
    q = base[:7]
    scores, found = served.search(q, 4)
    want_s, want_i = exact_search(q, base, ids, 4)
    assert np.array_equal(found, want_i) and np.allclose(scores, want_s, atol=1e-5)


def test_unreadable_saved_index_is_rebuilt_from_batches(corpus: Corpus_) -> None:
    corpus.add(1500)
    corpus.sync()
    (corpus.dir / "embeddings.faiss").write_bytes(b"garbage")
    (corpus.dir / "phash.faiss").write_bytes(b"garbage")
    idx = corpus.sync()
    assert idx.floats is not None and idx.floats.count == 1500 and idx.hashes.count == 1500
    assert corpus.sidecar()["count"] == 1500


def test_hash_index_switches_to_multi_index_hashing_with_recorded_recall(corpus: Corpus_) -> None:
    corpus.add(400)
    assert corpus.sync().hashes.index_type == "BinaryFlat"
    corpus.add(400)
    hashes = corpus.sync().hashes
    side = corpus.sidecar("phash.json")
    assert hashes.index_type == side["index_type"] == MIH_TYPE
    assert side["params"]["recall"] == 1.0 and side["params"]["recall_radius"] == 11
    # queries: corpus hashes with bits flipped, answered exactly as brute force would
    rng = np.random.default_rng(3)
    item_ids = sorted(corpus.hashes)
    for radius in (0, 4, 8, 11, 20):
        item = item_ids[rng.integers(len(item_ids))]
        q = corpus.hashes[item] ^ sum(
            1 << int(b) for b in rng.choice(64, min(radius, 9), replace=False)
        )
        ids, dists = hashes.search_radius(np.array([q], np.uint64), radius)[0]
        brute = {
            i: bin(h ^ q).count("1")
            for i, h in corpus.hashes.items()
            if bin(h ^ q).count("1") <= radius
        }
        assert dict(zip(ids.tolist(), dists.tolist(), strict=True)) == brute
    reloaded = corpus.sync().hashes
    assert reloaded.mih is not None and reloaded.count == 800


def test_search_radius_max_results_keeps_the_nearest(corpus: Corpus_) -> None:
    corpus.add(800)
    hashes = corpus.sync().hashes
    q = np.array([next(iter(corpus.hashes.values()))], np.uint64)
    for radius in (8, 30):
        ids, dists = hashes.search_radius(q, radius, max_results=3)[0]
        full_ids, full_d = hashes.search_radius(q, radius)[0]
        assert len(ids) == min(3, len(full_ids)) and dists[0] == 0
        assert sorted(dists.tolist()) == sorted(full_d.tolist())[: len(ids)]


def test_candidate_knn_uses_the_tables_and_records_its_recall(corpus: Corpus_) -> None:
    corpus.add(800)
    hashes = corpus.sync().hashes
    params = corpus.sidecar("phash.json")["params"]
    assert params["knn_exact_radius"] == 11 and params["knn_candidate_radius"] == 20
    # the calibration queries lie within 11 bits of a corpus hash: the nearest is always found
    assert params["knn_recall_at_1"] == 1.0 and 0.0 < params["knn_recall"] <= 1.0
    rng = np.random.default_rng(5)
    item_ids = sorted(corpus.hashes)
    items = [item_ids[j] for j in rng.choice(len(item_ids), 20, replace=False)]
    q = np.array(
        [
            corpus.hashes[i] ^ sum(1 << int(b) for b in rng.choice(64, n, replace=False))
            for i, n in zip(items, rng.integers(0, 12, 20).tolist(), strict=True)
        ],
        np.uint64,
    )
    dists, ids = hashes.search_knn_within(q, 10, 20)
    full_d, full_i = hashes.search_knn(q, 10)
    for row in range(len(q)):
        # exact within 11 bits: every exhaustive neighbour that near is returned, same distance
        near = {int(i): int(d) for d, i in zip(full_d[row], full_i[row], strict=True) if d <= 11}
        got = {int(i): int(d) for d, i in zip(dists[row], ids[row], strict=True) if i >= 0}
        assert near.items() <= got.items()
        assert all(d <= 11 for d in got.values())
    # exhaustive when asked for (a radius beyond the tables' exact range)
    wide = corpus.sync(IndexPolicy(flat_max=1000, hash_flat_max=500, hash_knn_radius=64))
    assert wide.hashes.params["knn_recall"] == 1.0


def test_large_ivf_is_built_shard_by_shard_into_on_disk_lists(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import faiss

    ondisk = IndexPolicy(
        flat_max=1000, calibration_queries=200, ondisk_min=1000, ondisk_shard_rows=400
    )
    inmem = IndexPolicy(flat_max=1000, calibration_queries=200)
    a, b = Corpus_(tmp_path / "a"), Corpus_(tmp_path / "b")
    a.add(1500)
    b.add(1500)  # same seed: same items, same vectors
    disk_store, mem_store = a.sync(ondisk).floats, b.sync(inmem).floats
    assert disk_store is not None and mem_store is not None
    data = sorted(p.name for p in a.dir.glob("embeddings.*.ivfdata"))
    assert len(data) == 1 and a.sidecar()["params"]["ivfdata"] == data[0]
    assert not list(a.dir.glob(".ivf-shard-*")) and not list(b.dir.glob("*.ivfdata"))
    # the index file holds no lists: far smaller than the in-memory index's file
    assert (a.dir / "embeddings.faiss").stat().st_size < (
        b.dir / "embeddings.faiss"
    ).stat().st_size / 2
    ids, base = a.matrix()
    q = base[:50]
    d1, i1 = disk_store.search(q, 10)
    d2, i2 = mem_store.search(q, 10)
    assert np.array_equal(i1, i2) and np.allclose(d1, d2)
    assert np.allclose(disk_store.index.reconstruct(int(ids[7])), base[7], atol=1e-3)
    # served memory-mapped from the list file
    served = a.sync(ondisk).floats
    assert served is not None
    assert isinstance(
        faiss.downcast_InvertedLists(served.index.invlists), faiss.OnDiskInvertedLists
    )
    assert np.array_equal(served.search(q, 10)[1], i1)
    # more batches: merged into a new list file, the old one removed
    a.add(400)
    grown = a.sync(ondisk).floats
    assert grown is not None and grown.count == 1900 == a.sidecar()["count"]
    now = sorted(p.name for p in a.dir.glob("embeddings.*.ivfdata"))
    assert len(now) == 1 and now != data
    ids, base = a.matrix()
    new_ids, new_vecs = ids[-400:], base[-400:]
    top = grown.search(new_vecs[:20], 1)[1][:, 0]
    assert (top == new_ids[:20]).mean() >= 0.9
    assert np.allclose(grown.index.reconstruct(int(new_ids[3])), new_vecs[3], atol=1e-3)
    again = a.sync(ondisk).floats
    assert again is not None and np.array_equal(again.search(q, 10)[1], grown.search(q, 10)[1])
    # without the trained template, more batches mean a rebuild, not a failure
    (a.dir / "embeddings.trained.faiss").unlink()
    a.add(300)
    rebuilt = a.sync(ondisk).floats
    assert rebuilt is not None and rebuilt.count == 2200 and rebuilt.is_ondisk
    assert len(list(a.dir.glob("embeddings.*.ivfdata"))) == 1
    # FAISS's printf progress of on-disk lists never reaches stdout (``--json`` goes there)
    assert capfd.readouterr().out == ""
