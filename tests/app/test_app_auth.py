"""Bearer tokens: once configured, writes and reads need one (public_read opts out); reviewer = token name."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import api_client, assert_error, new_home, seed_audit

from splitaudit.app.auth import ANONYMOUS, authenticate, bearer_token
from splitaudit.indexer.errors import AuthError

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789ab"}


def test_bearer_token_parsing() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def test_authenticate_rules() -> None:
    assert authenticate({}, "Bearer whatever", required=True) is ANONYMOUS
    assert authenticate(TOKENS, "Bearer tok-bob-0123456789ab", required=True).name == "bob"
    assert authenticate(TOKENS, None, required=False) is ANONYMOUS
    with pytest.raises(AuthError, match="needs an API token"):
        authenticate(TOKENS, None, required=True)
    with pytest.raises(AuthError, match="invalid API token"):
        authenticate(TOKENS, "Bearer tok-eve-0123456789ab", required=False)
    with pytest.raises(AuthError, match="malformed Authorization header"):
        authenticate(TOKENS, "Token tok-bob-0123456789ab", required=True)


def test_writes_need_a_token_and_reviewer_is_its_name(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    url = f"/api/v1/matches/{seeded.matches['near']}/review"
    with api_client(home, api_tokens=TOKENS) as client:
        assert_error(
            client.put(url, json={"verdict": "duplicate"}),
            401,
            "unauthorized",
            contains="needs an API token",
        )
        assert_error(
            client.put(
                url, json={"verdict": "duplicate"}, headers={"Authorization": "Bearer nope"}
            ),
            401,
            "unauthorized",
            contains="invalid API token",
        )
        assert_error(client.post("/api/v1/corpora", json={"name": "x"}), 401, "unauthorized")
        ok = client.put(
            url,
            json={"verdict": "duplicate", "note": "same"},
            headers={"Authorization": "Bearer tok-alice-0123456789"},
        )
        assert ok.status_code == 200 and ok.json()["reviewer"] == "alice"
        # reads need a token too once tokens exist
        assert_error(client.get(f"/api/v1/matches/{seeded.matches['near']}"), 401, "unauthorized")
        detail = client.get(
            f"/api/v1/matches/{seeded.matches['near']}",
            headers={"Authorization": "Bearer tok-bob-0123456789ab"},
        )
        assert detail.status_code == 200
        assert detail.json()["history"][0]["reviewer"] == "alice"


READS = (
    "/api/v1/audits/{audit}",
    "/api/v1/audits/{audit}/report",
    "/api/v1/audits/{audit}/matches",
    "/api/v1/audits",
    "/api/v1/corpora",
    "/api/v1/corpora/laion",
    "/api/v1/jobs",
    "/api/v1/jobs/{job}",
    "/api/v1/matches/{match}",
    "/api/v1/items/{item}/thumbnail",
    "/api/v1/split-items/{split_item}/thumbnail",
)
UI_READS = (
    "/ui",
    "/ui/audits/{audit}",
    "/ui/audits/{audit}/matches",
    "/ui/matches/{match}",
    "/ui/corpora",
    "/ui/audits/{audit}/export.csv",
)


def _urls(templates: tuple[str, ...], seeded: object) -> list[str]:
    ids = {
        "audit": seeded.audit,
        "job": seeded.job,
        "match": seeded.matches["near"],  # type: ignore[attr-defined]
        "item": seeded.items["file"],
        "split_item": seeded.split_items["cat"],
    }  # type: ignore[attr-defined]
    return [t.format(**ids) for t in templates]


def test_every_read_needs_a_token_once_tokens_exist(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home, api_tokens=TOKENS) as client:
        for url in _urls(READS, seeded):
            assert_error(client.get(url), 401, "unauthorized", contains="needs an API token")
            assert client.get(
                url, headers={"Authorization": "Bearer tok-bob-0123456789ab"}
            ).status_code in (
                200,
                404,
                409,
            ), url
        for url in _urls(UI_READS, seeded):
            page = client.get(url)
            assert page.status_code == 401 and page.headers["content-type"].startswith(
                "text/html"
            ), url
        assert client.get("/api/v1/health").status_code == 200  # liveness stays open


def test_public_read_opts_out_for_reads_only(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home, api_tokens=TOKENS, public_read=True) as client:
        # (/ui/audits/{id} itself needs a real summary, which seed_audit does not write)
        for url in _urls(READS + tuple(u for u in UI_READS if u != "/ui/audits/{audit}"), seeded):
            assert client.get(url).status_code in (200, 404, 409), url
        assert_error(
            client.put(
                f"/api/v1/matches/{seeded.matches['near']}/review", json={"verdict": "unsure"}
            ),
            401,
            "unauthorized",
        )
        thumb = client.get(f"/api/v1/items/{seeded.items['file']}/thumbnail")
        assert thumb.headers["cache-control"].startswith("public")


def test_read_requires_token_when_configured(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home, api_tokens=TOKENS) as client:
        assert_error(client.get(f"/api/v1/audits/{seeded.audit}"), 401, "unauthorized")
        assert_error(client.get("/api/v1/corpora"), 401, "unauthorized")
        ok = client.get(
            f"/api/v1/audits/{seeded.audit}",
            headers={"Authorization": "Bearer tok-bob-0123456789ab"},
        )
        assert ok.status_code == 200
        assert client.get("/api/v1/health").status_code == 200  # liveness stays open
        thumb = client.get(
            f"/api/v1/items/{seeded.items['file']}/thumbnail",
            headers={"Authorization": "Bearer tok-bob-0123456789ab"},
        )
        assert thumb.headers["cache-control"].startswith("private")


def test_without_tokens_reviews_are_anonymous(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        ok = client.put(
            f"/api/v1/matches/{seeded.matches['exact']}/review", json={"verdict": "unsure"}
        )
    assert ok.status_code == 200 and ok.json()["reviewer"] == "anonymous"
