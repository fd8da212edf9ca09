"""Dedup of a corpus with planted clusters: clusters, kept members, drop list, reviews, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.planted_dedup import plant
from sqlalchemy import func, select

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import DedupEdge, DedupRun
from splitaudit.indexer.dedup.outputs import dedup_report, drop_rows
from splitaudit.indexer.dedup.reviews import review_member
from splitaudit.indexer.dedup.service import create_dedup, run_dedup
from splitaudit.indexer.errors import NotFoundError, UsageError
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace


def _indexed(
    tmp_path: Path, embedder: object = None, spec: str | None = None
) -> tuple[Workspace, dict[str, set[str]]]:
    truth = plant(tmp_path / "corpus")
    (tmp_path / "corpus" / "exact_of_orig0.png").write_bytes(
        (tmp_path / "corpus" / "orig0.png").read_bytes()
    )
    truth["orig0.png"].add("exact_of_orig0.png")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(tmp_path / "corpus")], embedder=embedder, model_spec=spec)  # type: ignore[arg-type]
    return ws, truth


def _dedup(ws: Workspace, **kw: object) -> dict:
    run_id = create_dedup(ws, corpus="c", **kw)  # type: ignore[arg-type]
    run_dedup(ws, run_id)
    with ws.sessions() as s:
        report = dedup_report(s, run_id)
        report["drop"] = drop_rows(s, run_id)
    return report


def _clusters(report: dict) -> set[frozenset[str]]:
    return {frozenset(m["key"] for m in c["members"]) for c in report["clusters"]}


def test_planted_clusters_are_recovered_exactly_hash_only(tmp_path: Path) -> None:
    ws, truth = _indexed(tmp_path)
    report = _dedup(ws)
    assert _clusters(report) == {frozenset(keys) for keys in truth.values()}
    kept = {c["kept"] for c in report["clusters"]}
    # largest pixel count: the 384x288 upscale, the 264x200 bordered copies, the original over its downscale
    assert "copy2_resized.jpg" in kept and "copy3_border.jpg" in kept
    assert kept & {"orig0.png", "exact_of_orig0.png"} == {"exact_of_orig0.png"}  # tie -> first key
    for c in report["clusters"]:
        assert sum(m["kept"] for m in c["members"]) == 1
    all_members = {k for keys in truth.values() for k in keys}
    assert {k for k, _url in report["drop"]} == all_members - kept
    sm = report["summary"]
    assert sm["items"] == 21 and sm["clusters"] == 4 and sm["duplicates"] == len(all_members) - 4
    assert (
        sm["by_tier"]["exact"] == 1
        and sm["by_tier"]["exact"] + sm["by_tier"]["near"] == sm["duplicates"]
    )
    exact = next(
        c
        for c in report["clusters"]
        if "orig0.png" in c["kept"] + " ".join(m["key"] for m in c["members"])
    )
    tiers = {m["key"]: m["tier"] for m in exact["members"]}
    assert tiers["exact_of_orig0.png"] == "exact" and tiers["copy0_resized.jpg"] == "near"
    assert report["schema"] == "splitaudit.dedup/v1" and report["status"] == "done"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("first", "copy2_border.jpg"),
        ("smallest", "copy2_border.jpg"),
        ("oldest", "copy2_border.jpg"),
        ("last", "orig2.png"),
    ],
)
def test_keep_policies(tmp_path: Path, policy: str, expected: str) -> None:
    ws, _truth = _indexed(tmp_path)
    report = _dedup(ws, keep=policy)
    cluster = next(
        c for c in report["clusters"] if any(m["key"] == "orig2.png" for m in c["members"])
    )
    if policy == "smallest":
        sizes = {m["key"]: m["width"] * m["height"] for m in cluster["members"]}
        nbytes = {k: (tmp_path / "corpus" / k).stat().st_size for k in sizes}
        # equal pixel counts: the larger file is kept (keep.POLICIES)
        expected = min(sizes, key=lambda k: (sizes[k], -nbytes[k], k))
    assert cluster["kept"] == expected


def test_unknown_keep_policy_and_corpus_are_refused(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "home")
    with pytest.raises(UsageError, match="largest"):
        create_dedup(ws, corpus="c", keep="prettiest")
    with pytest.raises(NotFoundError):
        create_dedup(ws, corpus="nope")


def test_member_reviewed_not_duplicate_leaves_its_cluster_next_run(tmp_path: Path) -> None:
    ws, truth = _indexed(tmp_path)
    run_id = create_dedup(ws, corpus="c")
    run_dedup(ws, run_id)
    with ws.sessions() as s:
        report = dedup_report(s, run_id)
    flip = next(m for c in report["clusters"] for m in c["members"] if m["key"] == "copy1_flip.jpg")
    with transaction(ws.sessions) as s:
        review_member(
            s, run_id=run_id, item_id=flip["item_id"], verdict="not_duplicate", note="other shot"
        )
    with ws.sessions() as s:
        shown = dedup_report(s, run_id)
    assert any(
        m["review"] == "not_duplicate"
        for c in shown["clusters"]
        for m in c["members"]
        if m["key"] == "copy1_flip.jpg"
    )
    again = _dedup(ws)
    assert frozenset(truth["orig1.png"] - {"copy1_flip.jpg"}) in _clusters(again)
    assert all("copy1_flip.jpg" not in keys for keys in _clusters(again))
    assert "copy1_flip.jpg" not in {k for k, _ in again["drop"]}
    with transaction(ws.sessions) as s, pytest.raises(UsageError, match="verdict"):
        review_member(s, run_id=run_id, item_id=flip["item_id"], verdict="maybe")


def test_interrupted_run_resumes_without_duplicate_pairs(tmp_path: Path) -> None:
    ws, truth = _indexed(tmp_path)
    run_id = create_dedup(ws, corpus="c")
    calls = 0

    class Stop(Exception):
        pass

    def stop_after_two_chunks(_fraction: float, message: str) -> None:
        nonlocal calls
        if message.startswith("searched"):
            calls += 1
            if calls == 2:
                raise Stop

    with pytest.raises(Stop):
        run_dedup(ws, run_id, progress=stop_after_two_chunks, chunk_rows=4)
    with ws.sessions() as s:
        run = s.get_one(DedupRun, run_id)
        assert run.chunks_done == 2 and run.status == "failed"
        partial = s.scalar(select(func.count(DedupEdge.id)).where(DedupEdge.run_id == run_id))
    assert (
        create_dedup(ws, corpus="c", resume=True) == run_id
    )  # the same command again continues it
    assert create_dedup(ws, corpus="c", keep="first", resume=True) != run_id
    seen: list[str] = []
    run_dedup(ws, run_id, progress=lambda _f, m: seen.append(m), chunk_rows=4)
    searched = [m for m in seen if m.startswith("searched")]
    assert searched and searched[0].startswith("searched 12 of")  # resumed at the third chunk
    with ws.sessions() as s:
        report = dedup_report(s, run_id)
        total = s.scalar(select(func.count(DedupEdge.id)).where(DedupEdge.run_id == run_id))
    assert total is not None and partial is not None and total >= partial
    assert _clusters(report) == {frozenset(keys) for keys in truth.values()}


def test_semantic_clusters_are_separate_and_never_dropped(
    tmp_path: Path, tiny_model_spec: str
) -> None:
    from splitaudit.indexer.embed.loader import load_embedder

    ws, truth = _indexed(tmp_path, load_embedder(tiny_model_spec), tiny_model_spec)
    # The tiny model has random weights: its cosines only nominate candidates here (near_cosine
    # 1.0), so the visual clusters come from hashes and pixel verification, as in an audit.
    report = _dedup(ws, semantic=True, thresholds={"near_cosine": 1.0, "semantic_cosine": 0.9})
    assert _clusters(report) == {frozenset(keys) for keys in truth.values()}
    visual = {k for keys in truth.values() for k in keys}
    assert {k for k, _ in report["drop"]} <= visual
    assert report["semantic"] is True and report["summary"]["semantic_clusters"] == len(
        report["semantic_clusters"]
    )
    assert report["semantic_clusters"], "random weights put some unrelated images above cosine 0.9"
    for c in report["semantic_clusters"]:
        assert all(m["tier"] == "semantic" for m in c["members"])


def test_a_repeated_run_reads_the_verification_store_with_the_same_clusters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from splitaudit.indexer.match import verify_pass

    ws, truth = _indexed(tmp_path)
    decoded: list[object] = []
    real = verify_pass._load_image
    monkeypatch.setattr(verify_pass, "_load_image", lambda loc: decoded.append(loc) or real(loc))
    monkeypatch.setenv("SPLITAUDIT_VERIFY_CACHE_MB", "0")
    without = _clusters(_dedup(ws))
    monkeypatch.delenv("SPLITAUDIT_VERIFY_CACHE_MB")
    decoded.clear()
    first = _clusters(_dedup(ws))
    cold = len(decoded)
    with sqlite3.connect(ws.home / "cache" / "verify.sqlite") as db:
        (stored,) = db.execute("SELECT COUNT(*) FROM features WHERE kind = 'thumb'").fetchone()
    decoded.clear()
    again = _clusters(_dedup(ws))
    assert without == first == again == {frozenset(keys) for keys in truth.values()}
    # at least one decode fewer per stored thumbnail (identical files share one entry)
    assert stored > 0 and len(decoded) <= cold - stored
