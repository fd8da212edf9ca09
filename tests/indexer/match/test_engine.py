"""The audit engine end to end on a real (small) index: tiers, report shape, idempotence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import photo
from PIL import Image, ImageOps
from sqlalchemy import select

from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
from splitaudit.indexer.db.models import Item, Job
from splitaudit.indexer.errors import NotFoundError, UsageError
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.reporting.report import SCHEMA, audit_report
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.open import open_split
from splitaudit.indexer.workspace import Workspace


def _corpus(root: Path, n: int = 12) -> Path:
    for i in range(n):
        (root / "all").mkdir(parents=True, exist_ok=True)
        photo(i, (256, 192)).save(root / "all" / f"c{i}.jpg", quality=92)
    return root


def _split(root: Path, corpus: Path) -> Path:
    root.mkdir(parents=True)
    (root / "exact.jpg").write_bytes((corpus / "all" / "c0.jpg").read_bytes())
    photo(1, (256, 192)).resize((128, 96)).save(root / "resized.jpg", quality=30)
    ImageOps.mirror(photo(2, (256, 192))).save(root / "mirrored.png")
    photo(3, (256, 192)).crop((10, 8, 246, 184)).save(root / "cropped.jpg", quality=85)
    photo(500, (256, 192)).save(root / "clean.jpg", quality=90)
    photo(500, (256, 192)).save(root / "clean_again.png")  # within-split duplicate
    (root / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    return root


def _audit(ws: Workspace, split: Path, **kw: object) -> dict:
    split_id = create_split(ws, open_split(str(split)), name="test")
    audit_id = create_audit(ws, split_id=split_id, corpora=["c"], **kw)  # type: ignore[arg-type]
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        return audit_report(s, audit_id)


def test_tiers_report_and_failed_items_hash_only(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    report = _audit(ws, _split(tmp_path / "split", corpus))
    assert report["schema"] == SCHEMA and report["status"] == "done"
    verdicts = {it["key"]: it["verdict"] for it in report["items"]}
    assert verdicts["exact.jpg"] == "exact"
    assert verdicts["resized.jpg"] == "near"
    assert verdicts["mirrored.png"] == "near"
    assert verdicts["clean.jpg"] == "clean"
    assert [f["key"] for f in report["failed"]] == ["broken.jpg"]
    by_key = {it["key"]: it for it in report["items"]}
    top = by_key["exact.jpg"]["matches"][0]
    assert top["corpus_key"] == "all/c0.jpg" and top["corpus"] == "c"
    assert top["evidence"]["sha256_equal"] is True and isinstance(top["id"], int)
    assert by_key["mirrored.png"]["matches"][0]["evidence"].get("mirrored") is True
    assert by_key["resized.jpg"]["matches"][0]["corpus_key"] == "all/c1.jpg"
    sm = report["summary"]
    assert sm["items"] == 7 and sm["failed"] == 1 and sm["readable"] == 6
    assert sm["by_kind"]["exact"] == 1 and sm["by_kind"]["near"] >= 2
    assert report["model"]["semantic"] == "skipped"
    assert "--no-embed" in report["model"]["reason"]
    assert report["thresholds"]["phash_hamming"] >= 0
    assert report["index"]["c"]["hash_count"] == 12
    dups = {(d["a"], d["b"]) for d in report["split_duplicates"]}
    assert ("clean.jpg", "clean_again.png") in dups


def test_rerun_replaces_results_and_marks_job_done(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", 4)
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    split = _split(tmp_path / "split", corpus)
    split_id = create_split(ws, open_split(str(split)), name="s")
    audit_id = create_audit(ws, split_id=split_id, corpora=["c"])
    run_audit(ws, audit_id)
    run_audit(ws, audit_id)  # as after a crash: same results, no duplicates
    with ws.sessions() as s:
        report = audit_report(s, audit_id)
        job = s.get_one(Job, 1)
    ids = [m["id"] for it in report["items"] for m in it["matches"]]
    assert len(ids) == len(set(ids))
    assert sum(1 for it in report["items"] if it["verdict"] == "exact") == 1
    assert job.status == "done" and job.progress == 1.0


def test_bad_corpus_and_thresholds_are_refused(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", 2)
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    split_id = create_split(ws, open_split(str(corpus)), name="s")
    with pytest.raises(NotFoundError, match="nope"):
        create_audit(ws, split_id=split_id, corpora=["nope"])
    with pytest.raises(UsageError, match="unknown threshold"):
        create_audit(ws, split_id=split_id, corpora=["c"], thresholds={"bogus": 1})


def _indexed_with_model(home: Path, corpus: Path, spec: str) -> Workspace:
    """A workspace with ``corpus`` indexed as "c", embeddings by the model ``spec``."""
    from splitaudit.indexer.embed.loader import load_embedder

    ws = Workspace.open(home)
    index_sources(ws, "c", [FolderSource(corpus)], embedder=load_embedder(spec), model_spec=spec)
    return ws


def test_semantic_tier_with_embeddings(tmp_path: Path, tiny_model_spec: str) -> None:
    corpus = _corpus(tmp_path / "corpus", 6)
    ws = _indexed_with_model(tmp_path / "home", corpus, tiny_model_spec)
    split = tmp_path / "split"
    split.mkdir()
    photo(4, (256, 192)).resize((200, 150)).save(split / "near.jpg", quality=50)
    report = _audit(ws, split)
    assert report["model"]["semantic"] == "ok"
    item = report["items"][0]
    assert item["verdict"] == "near"
    assert item["matches"][0]["cosine"] is not None and item["matches"][0]["cosine"] > 0.9


def test_label_leak_self_and_match(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "x"
    corpus.mkdir(parents=True)
    photo(7, (256, 192)).save(corpus / "a.jpg", quality=92)
    (corpus / "a.txt").write_text("a tabby cat sleeping on a sofa")
    photo(8, (256, 192)).save(corpus / "b.jpg", quality=92)
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=None)
    split = tmp_path / "split"
    for cls in ("tabby cat", "dog"):
        (split / cls).mkdir(parents=True)
    photo(7, (256, 192)).resize((128, 96)).save(split / "tabby cat" / "img1.jpg", quality=60)
    photo(9, (256, 192)).save(split / "dog" / "dog_0001.jpg")
    photo(10, (256, 192)).save(split / "dog" / "img2.jpg")
    report = _audit(ws, split)
    by_key = {it["key"]: it for it in report["items"]}
    cat = by_key["tabby cat/img1.jpg"]
    leak = [m for m in cat["matches"] if m["kind"] == "label_leak"]
    assert leak and leak[0]["evidence"]["type"] == "match"
    assert leak[0]["evidence"]["hits"][0]["field"] == "caption"
    self_leak = [m for m in by_key["dog/dog_0001.jpg"]["matches"] if m["kind"] == "label_leak"]
    assert self_leak and self_leak[0]["evidence"]["type"] == "self"
    assert by_key["dog/img2.jpg"]["verdict"] == "clean"
    assert report["summary"]["by_label"]["dog"]["by_kind"]["label_leak"] == 1


def test_low_resolution_shifted_copy_is_near_via_verification(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "all"
    corpus.mkdir(parents=True)
    for i in range(8):
        photo(100 + i, (64, 64)).save(corpus / f"small{i}.png")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=None)
    split = tmp_path / "split"
    split.mkdir()
    original = photo(103, (64, 64))
    shifted = Image.new("RGB", (64, 64))
    shifted.paste(original.crop((2, 0, 64, 64)), (0, 0))
    shifted.paste(original.crop((62, 0, 64, 64)), (62, 0))
    shifted.save(split / "shifted.jpg", quality=75)
    photo(999, (64, 64)).save(split / "other.png")
    report = _audit(ws, split)
    by_key = {it["key"]: it for it in report["items"]}
    top = by_key["shifted.jpg"]["matches"][0]
    assert by_key["shifted.jpg"]["verdict"] == "near" and top["corpus_key"] == "all/small3.png"
    assert top["evidence"]["min_side"] == 64
    assert "verify_score" in top["evidence"] or "phash" in top["evidence"].get("near_rules", [])
    assert by_key["other.png"]["verdict"] == "clean"


def test_a_small_test_image_gets_small_top_k_embedding_candidates(
    tmp_path: Path, tiny_model_spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit searches the corpus vectors once, at ``SMALL_TOP_K`` where the split has a
    small test image; that row keeps its ``SMALL_TOP_K`` nearest as candidates, the large
    row its ``TOP_K`` (the candidate floor is lowered to -1: every corpus item is above it)."""
    from splitaudit.indexer.match import engine, orientation
    from splitaudit.indexer.match.pair_search import SMALL_TOP_K, TOP_K
    from splitaudit.indexer.store.float_index import FloatStore

    n = TOP_K + 4
    corpus = _corpus(tmp_path / "corpus", n)
    ws = _indexed_with_model(tmp_path / "home", corpus, tiny_model_spec)
    split = tmp_path / "split"
    split.mkdir()
    photo(700, (256, 192)).save(split / "large.jpg", quality=90)
    photo(701, (256, 192)).resize((48, 36)).save(split / "thumb.png")
    asked: list[int] = []
    search = FloatStore.search

    def spy(self: FloatStore, queries: object, k: int) -> object:
        asked.append(k)
        return search(self, queries, k)  # type: ignore[arg-type]

    monkeypatch.setattr(FloatStore, "search", spy)
    seen: dict[str, int] = {}
    verify = engine.verify_candidates

    def count(session, state, pairs, th, *args, **kwargs):  # type: ignore[no-untyped-def]
        pairs = list(pairs)
        for row, key in enumerate(state.keys):
            seen[key] = sum(p.row == row and p.cosine is not None for p in pairs)
            seen[f"{key} wide-only"] = sum(p.row == row and p.wide_only for p in pairs)
        return verify(session, state, pairs, th, *args, **kwargs)

    monkeypatch.setattr(engine, "verify_candidates", count)
    # the verifier's zoom-in search (3/4 of its CPU) is left out for wide-only pairs
    zooms: list[list[bool]] = []
    scores = orientation.oriented_verify_scores

    def zoom_spy(query, turns, thumbs, zoom=True):  # type: ignore[no-untyped-def]
        zooms.append(list(np.broadcast_to(zoom, len(turns))))
        return scores(query, turns, thumbs, zoom)

    monkeypatch.setattr(orientation, "oriented_verify_scores", zoom_spy)
    _audit(
        ws,
        split,
        thresholds={"candidate_cosine": -1.0, "semantic_cosine": 0.99, "near_cosine": 0.995},
    )
    assert asked and asked[0] == SMALL_TOP_K
    wide = seen.pop("thumb.png wide-only")
    assert seen.pop("large.jpg wide-only") == 0 and wide > 0
    assert seen == {"large.jpg": TOP_K, "thumb.png": n}  # the thumbnail: every corpus item
    thumb_zoom = next(z for z in zooms if len(z) >= n)
    assert thumb_zoom.count(False) == wide  # small pairs zoom in, but for the wide-only ones


@pytest.mark.parametrize("side", [80, 96])
def test_a_thumbnail_test_image_is_searched_by_shape_whatever_small_side_says(
    tmp_path: Path, tiny_model_spec: str, monkeypatch: pytest.MonkeyPatch, side: int
) -> None:
    """The shape search runs for test images up to ``SHAPE_SIDE`` (96) px, not only under
    ``small_side`` (96): a zoomed copy of a 96-px corpus thumbnail, at 80 px (a small pair)
    and at 96 px (not small), is nominated by its shape descriptor; a large test image is not
    searched."""
    from splitaudit.indexer.match import engine

    corpus = tmp_path / "corpus" / "all"
    corpus.mkdir(parents=True)
    for i in range(8):
        photo(i, (96, 96)).save(corpus / f"t{i}.png")
    ws = _indexed_with_model(tmp_path / "home", corpus.parent, tiny_model_spec)
    split = tmp_path / "split"
    split.mkdir()
    photo(3, (96, 96)).crop((8, 8, 88, 88)).resize((side, side)).save(split / "thumb.png")
    photo(700, (256, 192)).save(split / "large.jpg", quality=90)
    shaped: dict[str, set[int]] = {}
    verify = engine.verify_candidates

    def spy(session, state, pairs, th, *args, **kwargs):  # type: ignore[no-untyped-def]
        pairs = list(pairs)
        for p in pairs:
            if p.shape is not None:
                shaped.setdefault(state.keys[p.row], set()).add(p.item_id)
        return verify(session, state, pairs, th, *args, **kwargs)

    monkeypatch.setattr(engine, "verify_candidates", spy)
    _audit(ws, split)
    with ws.sessions() as s:
        source = s.scalars(select(Item.id).where(Item.key == "all/t3.png")).one()
    assert set(shaped) == {"thumb.png"} and source in shaped["thumb.png"]


def test_a_large_copy_the_vector_search_misses_is_nominated_by_its_phash(
    tmp_path: Path, tiny_model_spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Among look-alike images an edited copy's embedding can rank below the vector search's
    ``TOP_K`` (a 4-px black border: median rank 80 among tiles of one photo,
    ``bench.dedup_photos``) while its pHash ranks first. Every test image, embedded or not,
    gets its pHash k-NN candidates; the cosine still decides whether a large pair is verified
    (``candidate_cosine``). The vector search is made to miss the source here, so only the
    hash k-NN can nominate it."""
    from splitaudit.indexer.features.perceptual import phash
    from splitaudit.indexer.store.float_index import FloatStore

    corpus = _corpus(tmp_path / "corpus", 14)
    ws = _indexed_with_model(tmp_path / "home", corpus, tiny_model_spec)
    with ws.sessions() as s:
        source = s.execute(select(Item.id).where(Item.key == "all/c1.jpg")).scalar_one()
    split = tmp_path / "split"
    split.mkdir()
    original = photo(1, (256, 192))
    bordered = ImageOps.expand(original, border=6, fill=(0, 0, 0))
    bordered.save(split / "bordered.png")
    bits = bin((phash(original).value ^ phash(bordered).value) % 2**64).count("1")
    assert 8 < bits <= 20  # beyond the near radius, within the candidate radius
    search = FloatStore.search

    def without_source(self: FloatStore, queries: object, k: int) -> object:
        scores, ids = search(self, queries, k)  # type: ignore[arg-type]
        return np.where(ids == source, -1.0, scores), np.where(ids == source, -1, ids)

    monkeypatch.setattr(FloatStore, "search", without_source)
    item = _audit(ws, split)["items"][0]
    assert item["verdict"] == "near"
    top = item["matches"][0]
    assert top["corpus_key"] == "all/c1.jpg" and top["evidence"]["phash_hamming"] == bits
    assert top["evidence"]["verify_score"] >= 0.7 and "verify" in top["evidence"]["near_rules"]
    # the candidate rule still decides: a cosine that does not vouch for the pair leaves it
    strict = {"candidate_cosine": 0.9999, "semantic_cosine": 0.99995, "near_cosine": 0.99999}
    item = _audit(ws, split, thresholds=strict)["items"][0]
    assert all(m["corpus_key"] != "all/c1.jpg" or m["kind"] != "near" for m in item["matches"])
