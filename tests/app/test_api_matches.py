"""Matches: listing with filters, detail with history, recording verdicts."""

from __future__ import annotations

from pathlib import Path

from apptest_support import api_client, assert_error, new_home, seed_audit


def test_list_filter_and_page_matches(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    base = f"/api/v1/audits/{seeded.audit}/matches"
    with api_client(home) as client:
        everything = client.get(base).json()
        near = client.get(base, params={"kind": "near"}).json()
        dogs = client.get(base, params={"label": "dog"}).json()
        page = client.get(base, params={"page": 2, "page_size": 2}).json()
        client.put(
            f"/api/v1/matches/{seeded.matches['semantic']}/review",
            json={"verdict": "not_duplicate"},
        )
        reviewed = client.get(base, params={"review": "not_duplicate"}).json()
        unreviewed = client.get(base, params={"review": "unreviewed"}).json()
        assert_error(
            client.get(base, params={"kind": "blurry"}),
            400,
            "bad_request",
            contains="unknown match kind",
        )
        assert_error(client.get(base, params={"review": "nope"}), 400, "bad_request")
        assert_error(client.get("/api/v1/audits/999/matches"), 404, "not_found")
    assert everything["total"] == 3
    assert [m["kind"] for m in everything["items"]] == ["exact", "near", "semantic"]
    first = everything["items"][0]
    assert first["split_item"]["key"] == "cat/1.png" and first["corpus_key"] == "k1.png"
    assert first["corpus_item"]["caption"] == "a cat on a mat"
    assert (near["total"], near["items"][0]["id"]) == (1, seeded.matches["near"])
    assert dogs["total"] == 2
    assert (page["total"], len(page["items"]), page["page"]) == (3, 1, 2)
    assert [m["id"] for m in reviewed["items"]] == [seeded.matches["semantic"]]
    assert unreviewed["total"] == 2


def test_review_history_is_kept(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    match_id = seeded.matches["near"]
    with api_client(home) as client:
        first = client.put(
            f"/api/v1/matches/{match_id}/review", json={"verdict": "duplicate", "note": "same dog"}
        )
        second = client.put(
            f"/api/v1/matches/{match_id}/review", json={"verdict": "unsure", "note": None}
        )
        detail = client.get(f"/api/v1/matches/{match_id}").json()
    assert first.status_code == 200 and second.status_code == 200
    body = second.json()
    assert (
        body["match_id"] == match_id
        and body["verdict"] == "unsure"
        and body["at"].endswith("+00:00")
    )
    assert detail["review"]["verdict"] == "unsure"
    assert [h["verdict"] for h in detail["history"]] == ["unsure", "duplicate"]
    assert detail["history"][1]["note"] == "same dog"
    assert detail["kind"] == "near" and detail["hamming"] == 5


def test_review_errors(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    url = f"/api/v1/matches/{seeded.matches['near']}/review"
    with api_client(home) as client:
        assert_error(
            client.put(url, json={"verdict": "maybe"}), 422, "invalid_request", contains="verdict"
        )
        assert_error(
            client.put(url, json={"verdict": "duplicate", "extra": 1}), 422, "invalid_request"
        )
        assert_error(
            client.put(url, json={"verdict": "duplicate", "note": "x" * 10_001}),
            422,
            "invalid_request",
        )
        assert_error(
            client.put("/api/v1/matches/999/review", json={"verdict": "duplicate"}),
            404,
            "not_found",
            contains="match 999",
        )
        assert_error(client.get("/api/v1/matches/999"), 404, "not_found")
        # nothing was recorded by the failed attempts
        assert client.get(f"/api/v1/matches/{seeded.matches['near']}").json()["history"] == []
