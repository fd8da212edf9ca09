"""Corpora: list, create, detail with failed items, and server-side index jobs under source roots."""

from __future__ import annotations

from pathlib import Path

from apptest_support import api_client, assert_error, new_home, seed_audit, workspace

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Corpus, FailedItem, Job, Shard
from splitaudit.indexer.store.sidecar import Sidecar


def test_create_list_and_get(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    with api_client(home) as client:
        created = client.post(
            "/api/v1/corpora", json={"name": "web", "model": "efficientnet-lite0"}
        )
        hashes_only = client.post("/api/v1/corpora", json={"name": "hashes", "no_embed": True})
        listed = client.get("/api/v1/corpora").json()
        detail = client.get("/api/v1/corpora/web").json()
        assert_error(
            client.post("/api/v1/corpora", json={"name": "web"}),
            409,
            "conflict",
            contains="already exists",
        )
        assert_error(
            client.post("/api/v1/corpora", json={"name": "../etc"}),
            400,
            "bad_request",
            contains="invalid corpus name",
        )
        assert_error(
            client.get("/api/v1/corpora/nope"),
            404,
            "not_found",
            contains="known corpora: hashes, web",
        )
    assert created.status_code == 201 and created.headers["location"] == "/api/v1/corpora/web"
    assert created.json()["model"]["spec"] == "efficientnet-lite0"
    assert hashes_only.json()["model"]["spec"] is None
    assert [c["name"] for c in listed["items"]] == ["hashes", "web"] and listed["total"] == 2
    assert detail["counts"] == {"items": 0, "embedded": 0, "failed": 0, "shards": 0}
    assert detail["index"] == {"hashes": None, "vectors": None}
    assert detail["failed"]["items"] == []


def test_detail_counts_index_info_and_failed_items_paged(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seed_audit(home, tmp_path / "files")
    ws = workspace(home)
    try:
        with transaction(ws.sessions) as s:
            corpus = s.query(Corpus).filter_by(name="laion").one()
            shard = s.query(Shard).filter_by(corpus_id=corpus.id).one()
            s.add_all(
                FailedItem(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key=f"bad{i}.jpg",
                    uri=f"/x/bad{i}.jpg",
                    reason=f"truncated image {i}",
                )
                for i in range(5)
            )
        Sidecar(
            kind="binary", model_id="phash64", dim=64, metric="hamming", count=6, generation=1
        ).save(ws.corpus_dir("laion") / "phash.json")
    finally:
        ws.close()
    with api_client(home) as client:
        page = client.get(
            "/api/v1/corpora/laion", params={"failed_page": 2, "failed_page_size": 2}
        ).json()
        assert_error(
            client.get("/api/v1/corpora/laion", params={"failed_page": 0}), 422, "invalid_request"
        )
    assert page["counts"]["items"] == 6 and page["counts"]["failed"] == 5
    assert page["model"] == {"id": "tiny", "spec": "/m", "dim": 16}
    assert [f["key"] for f in page["failed"]["items"]] == ["bad2.jpg", "bad3.jpg"]
    assert (
        page["failed"]["items"][0]["reason"] == "truncated image 2" and page["failed"]["total"] == 5
    )
    assert page["index"]["hashes"]["count"] == 6 and page["index"]["hashes"]["up_to_date"] is True
    assert page["index"]["vectors"] is None
    assert page["shards"] == {"done": 1}


def test_sources_become_an_index_job_only_under_a_root(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    root = tmp_path / "data"
    (root / "photos").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    with api_client(home, source_roots=[root]) as client:
        client.post("/api/v1/corpora", json={"name": "web", "no_embed": True})
        accepted = client.post(
            "/api/v1/corpora/web/sources", json={"sources": [str(root / "photos")]}
        )
        assert_error(
            client.post("/api/v1/corpora/web/sources", json={"sources": [str(outside)]}),
            403,
            "path_not_allowed",
            contains="outside the server's source roots",
        )
        assert_error(
            client.post("/api/v1/corpora/web/sources", json={"sources": [str(root / "escape")]}),
            403,
            "path_not_allowed",
        )
        assert_error(
            client.post(
                "/api/v1/corpora/web/sources", json={"sources": [str(root / ".." / "elsewhere")]}
            ),
            403,
            "path_not_allowed",
        )
        assert_error(
            client.post("/api/v1/corpora/web/sources", json={"sources": ["relative/dir"]}),
            400,
            "bad_request",
            contains="absolute path",
        )
        assert_error(
            client.post("/api/v1/corpora/other/sources", json={"sources": [str(root / "photos")]}),
            404,
            "not_found",
        )
        assert_error(
            client.post("/api/v1/corpora/web/sources", json={"sources": []}), 422, "invalid_request"
        )
        created = client.post(
            "/api/v1/corpora", json={"name": "auto", "sources": [str(root / "photos")]}
        )
        job = client.get(f"/api/v1/jobs/{accepted.json()['id']}").json()
    assert accepted.status_code == 202
    assert accepted.headers["location"] == f"/api/v1/jobs/{accepted.json()['id']}"
    assert job["kind"] == "index" and job["status"] == "queued"
    assert job["params"] == {
        "corpus": "web",
        "sources": [str(root / "photos")],
        "model": None,
        "no_embed": True,
        "workers": 1,
        "allowed_roots": [str(root.resolve())],
        "models_roots": [],
    }
    assert created.status_code == 201 and isinstance(created.json()["job_id"], int)
    ws = workspace(home)
    try:
        with ws.sessions() as s:
            assert s.query(Job).count() == 2  # refused requests queued nothing
    finally:
        ws.close()


def test_sources_refused_when_no_roots_configured(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        client.post("/api/v1/corpora", json={"name": "web"})
        assert_error(
            client.post("/api/v1/corpora/web/sources", json={"sources": [str(tmp_path)]}),
            403,
            "path_not_allowed",
            contains="SPLITAUDIT_SOURCE_ROOTS",
        )


def test_model_conflict_with_corpus_model(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    with api_client(new_home(tmp_path), source_roots=[root]) as client:
        client.post("/api/v1/corpora", json={"name": "web", "model": "efficientnet-lite0"})
        assert_error(
            client.post(
                "/api/v1/corpora/web/sources", json={"sources": [str(root)], "model": "ViT-B-32"}
            ),
            409,
            "conflict",
            contains="efficientnet-lite0",
        )
