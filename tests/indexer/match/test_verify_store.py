"""The verification store: corpus images' thumbnails and keypoints kept between audits."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.geometric_case import crop_rotation_case
from PIL import Image

from splitaudit.indexer.audit.service import create_audit, run_audit
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import verify_pass
from splitaudit.indexer.match.geometry import keypoints
from splitaudit.indexer.match.verify import verify_thumbnail
from splitaudit.indexer.match.verify_store import STORE_FILE, VerifyStore, open_verify_store
from splitaudit.indexer.reporting.report import audit_report
from splitaudit.indexer.workspace import Workspace

NOMINATE_ALL = {"candidate_cosine": -1.0}  # every neighbour goes to the geometric match


def _store(tmp_path: Path, cap_mb: float = 64, version: str = "test") -> VerifyStore:
    return VerifyStore(tmp_path / STORE_FILE, int(cap_mb * 1024 * 1024), version=version)


def test_thumbnails_and_keypoints_read_back_exactly(tmp_path: Path) -> None:
    image = sample_photo("coffee")
    found = keypoints(image)
    assert len(found) > 50
    thumb = verify_thumbnail(image)
    store = _store(tmp_path)
    store.put_thumbnail("a" * 64, thumb)
    store.put_keypoints("a" * 64, found)
    store.close()
    again = _store(tmp_path)
    assert np.array_equal(again.thumbnails(["a" * 64, "b" * 64])["a" * 64], thumb)
    got = again.keypoints(["a" * 64])["a" * 64]
    assert np.array_equal(got.points, found.points) and got.points.dtype == np.float32
    assert np.array_equal(got.descriptors, found.descriptors)
    assert got.descriptors.dtype == np.float32
    assert (got.width, got.height) == (found.width, found.height)
    assert (again.hits, again.misses) == (2, 1)


def test_keypoints_whose_descriptors_are_not_bytes_are_not_kept(tmp_path: Path) -> None:
    found = keypoints(sample_photo("coffee"))
    odd = type(found)(found.points, found.descriptors + 0.5, found.width, found.height)
    store = _store(tmp_path)
    store.put_keypoints("a" * 64, odd)
    store.flush()
    assert store.keypoints(["a" * 64]) == {}


def test_rows_of_other_settings_are_dropped_when_the_store_opens(tmp_path: Path) -> None:
    store = _store(tmp_path, version="old")
    store.put_thumbnail("a" * 64, np.zeros((32, 32), np.uint8))
    store.close()
    assert _store(tmp_path, version="new").thumbnails(["a" * 64]) == {}
    assert _store(tmp_path, version="old").thumbnails(["a" * 64]) == {}  # gone for good


def test_the_least_recently_used_entries_go_first_above_the_cap(tmp_path: Path) -> None:
    thumb = np.arange(32 * 32, dtype=np.uint8).reshape(32, 32)  # ~1.2 KiB stored
    store = _store(tmp_path, cap_mb=10 / 1024)  # ~10 KiB: room for 8
    for i in range(8):
        store.put_thumbnail(f"{i:064d}", thumb)
        store.flush()
    store.thumbnails([f"{0:064d}"])  # the oldest, read again: now recently used
    store.flush()
    for i in range(8, 12):
        store.put_thumbnail(f"{i:064d}", thumb)
    store.close()
    left = set(_store(tmp_path, cap_mb=10 / 1024).thumbnails(f"{i:064d}" for i in range(12)))
    assert f"{0:064d}" in left and f"{1:064d}" not in left and f"{11:064d}" in left
    assert len(left) <= 8


def test_an_unreadable_entry_is_a_miss(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.put_thumbnail("a" * 64, np.zeros((32, 32), np.uint8))
    store.close()
    with sqlite3.connect(tmp_path / STORE_FILE) as db:
        db.execute("UPDATE features SET data = X'00010203'")
    assert _store(tmp_path).thumbnails(["a" * 64]) == {}


def test_the_store_can_be_turned_off_and_an_unusable_one_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SPLITAUDIT_VERIFY_CACHE_MB", "0")
    assert VerifyStore.for_home(tmp_path) is None
    monkeypatch.setenv("SPLITAUDIT_VERIFY_CACHE_MB", "lots")
    with caplog.at_level(logging.WARNING):
        store = VerifyStore.for_home(tmp_path)
    assert store is not None and "not a whole number" in caplog.text
    store.close()
    monkeypatch.delenv("SPLITAUDIT_VERIFY_CACHE_MB")
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    with caplog.at_level(logging.WARNING):
        assert VerifyStore.for_home(blocked) is None
    assert "auditing without it" in caplog.text


def test_an_opened_store_is_written_and_closed_even_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thumb = verify_thumbnail(sample_photo("coffee"))
    with pytest.raises(RuntimeError), open_verify_store(tmp_path) as store:
        assert store is not None
        store.put_thumbnail("d1", thumb)
        raise RuntimeError("the audit failed")
    with open_verify_store(tmp_path) as again:
        assert again is not None
        assert np.array_equal(again.thumbnails(["d1"])["d1"], thumb)
    monkeypatch.setenv("SPLITAUDIT_VERIFY_CACHE_MB", "0")
    with open_verify_store(tmp_path) as off:
        assert off is None


@pytest.fixture
def geometric_case(tmp_path: Path, tiny_model_spec: str) -> tuple[Workspace, int]:
    """A corpus and a split whose planted crop + rotation only the geometric match finds."""
    return crop_rotation_case(tmp_path, tiny_model_spec)


def _audit(ws: Workspace, split_id: int) -> list[dict[str, Any]]:
    audit_id = create_audit(ws, split_id=split_id, corpora=["c"], thresholds=NOMINATE_ALL)
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        items = audit_report(s, audit_id)["items"]
    return [
        {
            **{k: v for k, v in it.items() if k not in ("audit_id", "review")},
            "matches": [
                {k: v for k, v in m.items() if k not in ("id", "review")} for m in it["matches"]
            ],
        }
        for it in items
    ]


def test_a_second_audit_reuses_the_store_with_the_same_results(
    geometric_case: tuple[Workspace, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, split_id = geometric_case
    decoded: list[int] = []
    real = verify_pass._load_image

    def counting(locator: dict[str, Any] | None) -> Image.Image | None:
        decoded.append(1)
        return real(locator)

    monkeypatch.setattr(verify_pass, "_load_image", counting)
    monkeypatch.setenv("SPLITAUDIT_VERIFY_CACHE_MB", "0")
    without = _audit(ws, split_id)
    assert not (ws.home / "cache" / STORE_FILE).exists()
    monkeypatch.delenv("SPLITAUDIT_VERIFY_CACHE_MB")
    decoded.clear()
    cold = _audit(ws, split_id)
    cold_decodes = len(decoded)
    decoded.clear()
    warm = _audit(ws, split_id)
    assert cold == without and warm == without  # the same verdicts, matches and evidence
    planted = next(it for it in warm if it["key"] == "planted.jpg")
    assert planted["verdict"] == "near" and "geometry" in planted["matches"][0]["evidence"]
    # no decode at all: the corpus images' features come from the store, the test images from
    # the split's ingestion
    assert len(decoded) == 0 < cold_decodes
    with sqlite3.connect(ws.home / "cache" / STORE_FILE) as db:
        kinds = dict(db.execute("SELECT kind, COUNT(*) FROM features GROUP BY kind").fetchall())
    assert kinds["thumb"] == 4 and kinds["keypoints"] >= 1


def test_split_images_beyond_the_kept_budget_are_decoded_again_with_the_same_results(
    geometric_case: tuple[Workspace, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from splitaudit.indexer.audit import ingest

    ws, split_id = geometric_case
    decoded: list[dict[str, Any] | None] = []
    real = verify_pass._load_image

    def counting(locator: dict[str, Any] | None) -> Image.Image | None:
        decoded.append(locator)
        return real(locator)

    monkeypatch.setattr(verify_pass, "_load_image", counting)
    monkeypatch.setenv("SPLITAUDIT_VERIFY_CACHE_MB", "0")
    kept = _audit(ws, split_id)
    kept_decodes = len(decoded)
    decoded.clear()
    monkeypatch.setattr(ingest, "KEPT_IMAGES_BYTES", 0)
    again = _audit(ws, split_id)
    assert again == kept
    # the two test images with candidates are decoded again, and nothing else changes
    assert len(decoded) == kept_decodes + 2


def test_verification_runs_blas_on_the_calling_thread_only(
    geometric_case: tuple[Workspace, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # BLAS threads spinning against the keypoint detection threads cost the audit ~40% more
    # CPU time: the verification step runs its products single-threaded, and restores BLAS after.
    from threadpoolctl import threadpool_info

    from splitaudit.indexer.match.geometric_tier import GeometricTier

    def blas_threads() -> int:
        return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    ws, split_id = geometric_case
    before = blas_threads()
    seen: list[int] = []
    real = GeometricTier.submit

    def recording(self: GeometricTier, *args: Any, **kwargs: Any) -> Any:
        seen.append(blas_threads())  # between the pixel verifier and the geometric match
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GeometricTier, "submit", recording)
    _audit(ws, split_id)
    assert seen and set(seen) == {1}
    assert blas_threads() == before
