"""Security of the app factory: no open server on the network, read-only tokens, CSP and
hardening headers, and only http(s) links rendered from corpus metadata."""

from __future__ import annotations

from pathlib import Path

from apptest_support import new_home, seed_audit, workspace
from fastapi.testclient import TestClient
from sqlalchemy import update

from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings
from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Item

WRITE = "writer-token-0123456789"
READ = "reader-token-0123456789"


def _client(home: Path, base_url: str = "http://testserver", **settings: object) -> TestClient:
    settings.setdefault("run_worker", False)
    return TestClient(
        create_app(ApiSettings(home=home, **settings)),  # type: ignore[arg-type]
        base_url=base_url,
        raise_server_exceptions=False,
    )


def test_without_tokens_the_factory_refuses_requests_from_the_network(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    with _client(home, base_url="http://192.0.2.10:8000") as client:
        refused = client.get("/api/v1/audits")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "anonymous_refused"
        assert "SPLITAUDIT_API_TOKENS" in refused.json()["error"]["message"]
        assert client.get("/ui").status_code == 403
        assert client.get("/api/v1/health").status_code == 200
    with _client(home, base_url="http://127.0.0.1:8000") as client:
        assert client.get("/api/v1/audits").status_code == 200
    with _client(home, base_url="http://192.0.2.10:8000", allow_anonymous=True) as client:
        assert client.get("/api/v1/audits").status_code == 200
    with _client(home, base_url="http://192.0.2.10:8000", api_tokens={"ci": WRITE}) as client:
        answer = client.get("/api/v1/audits", headers={"Authorization": f"Bearer {WRITE}"})
        assert answer.status_code == 200


def test_a_read_only_token_reads_but_cannot_write(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    tokens = {"ci": WRITE, "board": READ}
    with _client(home, api_tokens=tokens, api_token_roles={"board": "read"}) as client:
        reader = {"Authorization": f"Bearer {READ}"}
        assert client.get(f"/api/v1/audits/{seeded.audit}", headers=reader).status_code == 200
        url = f"/api/v1/matches/{seeded.matches['near']}/review"
        refused = client.put(url, json={"verdict": "duplicate"}, headers=reader)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        assert "read-only" in refused.json()["error"]["message"]
        writer = {"Authorization": f"Bearer {WRITE}"}
        assert client.put(url, json={"verdict": "duplicate"}, headers=writer).status_code == 200


def test_every_response_carries_a_strict_csp_and_hardening_headers(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seed_audit(home, tmp_path / "files")
    with _client(home) as client:
        for path in ("/ui", "/api/v1/health", "/api/v1/audits/999"):
            headers = client.get(path).headers
            csp = headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
            assert "unsafe-inline" not in csp
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] in ("no-referrer", "same-origin")
        docs = client.get("/docs").headers
        assert docs["x-content-type-options"] == "nosniff"


def test_the_pair_view_links_only_http_urls_and_has_no_inline_styles(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    ws = workspace(home)
    try:
        for bad in (
            "javascript:alert(document.cookie)",
            " JavaScript:alert(1)",
            "data:text/html,x",
        ):
            with transaction(ws.sessions) as s:
                s.execute(update(Item).values(url=bad))
            with _client(home) as client:
                page = client.get(f"/ui/matches/{seeded.matches['near']}").text
            assert bad.strip() in page  # shown as text
            assert f'href="{bad}"' not in page and 'href="javascript' not in page.lower()
            assert 'href=" javascript' not in page.lower()
        with transaction(ws.sessions) as s:
            s.execute(update(Item).values(url="https://example.org/cat.jpg"))
        with _client(home) as client:
            page = client.get(f"/ui/matches/{seeded.matches['near']}").text
        assert 'href="https://example.org/cat.jpg"' in page
        assert "style=" not in page
    finally:
        ws.close()
