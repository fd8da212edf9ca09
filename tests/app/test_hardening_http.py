"""HTTP hardening: keep-alive after a 500, one body cap (chunked too), deep JSON, short messages, OpenAPI."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from apptest_support import api_client, assert_error, new_home

from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings

DEEP = "[" * 100_000 + "]" * 100_000
WRITE_ROUTES = (
    ("POST", "/api/v1/audits"),
    ("POST", "/api/v1/corpora"),
    ("PUT", "/api/v1/matches/1/review"),
    ("POST", "/api/v1/corpora/x/sources"),
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[int]:
    """The app under uvicorn on a free port, with one extra route that crashes (a 500)."""
    app = create_app(ApiSettings(home=new_home(tmp_path), run_worker=False))

    @app.get("/crash")
    def crash() -> None:
        raise RuntimeError("boom")

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(30)


def test_a_500_keeps_the_connection_alive_ten_times_in_a_row(live_server: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", live_server, timeout=30)
    try:
        conn.connect()
        sock = conn.sock
        for _ in range(10):
            for path, status in (
                ("/crash", 500),
                ("/api/v1/health", 200),
                ("/api/v1/audits/99", 404),
            ):
                conn.request("GET", path)
                response = conn.getresponse()
                body = json.loads(response.read())
                assert response.status == status, body
                assert (response.getheader("connection") or "").lower() != "close"
                assert conn.sock is sock, f"{path}: the server dropped the keep-alive connection"
            assert body["error"]["code"] == "not_found"
        conn.request("GET", "/crash")
        crash = conn.getresponse()
        assert json.loads(crash.read()) == {
            "error": {
                "code": "internal_error",
                "message": "internal error: RuntimeError; see the server log",
            }
        }
    finally:
        conn.close()


@pytest.mark.parametrize(("method", "path"), WRITE_ROUTES)
def test_deeply_nested_json_is_400_everywhere(tmp_path: Path, method: str, path: str) -> None:
    with api_client(new_home(tmp_path)) as client:
        response = client.request(
            method, path, content=DEEP, headers={"content-type": "application/json"}
        )
        assert_error(response, 400, "bad_request")


def test_deeply_nested_thresholds_field_is_400(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        response = client.post(
            "/api/v1/audits",
            data={"corpus": "c", "thresholds": "[" * 5000 + "]" * 5000},
            files={"split": ("s.zip", b"PK\x05\x06" + b"\0" * 18)},
        )
        assert response.status_code in (400, 404), response.text  # the corpus check may come first
        assert response.status_code != 500


@pytest.mark.parametrize(("method", "path"), WRITE_ROUTES)
def test_bodies_over_the_cap_are_413_with_the_setting_named(
    tmp_path: Path, method: str, path: str
) -> None:
    body = json.dumps({"name": "x", "note": "n" * 40_000}).encode()
    with api_client(new_home(tmp_path), max_json_mb=0.01) as client:
        declared = client.request(
            method, path, content=body, headers={"content-type": "application/json"}
        )
        assert_error(declared, 413, "payload_too_large", contains="SPLITAUDIT_MAX_JSON_MB")

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(body), 4096):
                yield body[start : start + 4096]

        chunked = client.request(
            method, path, content=chunks(), headers={"content-type": "application/json"}
        )
        assert "content-length" not in chunked.request.headers
        assert_error(chunked, 413, "payload_too_large", contains="SPLITAUDIT_MAX_JSON_MB")


@pytest.mark.parametrize(("method", "path"), WRITE_ROUTES[1:])
def test_multipart_elsewhere_than_the_upload_endpoint_is_capped_too(
    tmp_path: Path, method: str, path: str
) -> None:
    with api_client(new_home(tmp_path), max_json_mb=0.01) as client:
        response = client.request(method, path, files={"f": ("x.bin", b"\0" * 50_000)})
        assert_error(response, 413, "payload_too_large")


def test_uploads_are_not_held_to_the_json_cap(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path), max_json_mb=0.001) as client:
        response = client.post(
            "/api/v1/audits", data={"corpus": "nope"}, files={"split": ("s.zip", b"\0" * 50_000)}
        )
        assert response.status_code != 413, response.text


def test_error_messages_quote_only_an_excerpt_of_the_input(tmp_path: Path) -> None:
    roots = tmp_path / "roots"
    roots.mkdir()
    huge = "/" + "a" * 500_000
    with api_client(new_home(tmp_path), source_roots=[roots], api_tokens={}) as client:
        for method, path, body in (
            ("POST", "/api/v1/corpora", {"name": "c", "sources": [huge]}),
            ("POST", "/api/v1/audits", {"manifest": huge, "corpus": ["c"]}),
            ("POST", "/api/v1/audits", {"manifest": "relative" * 50_000, "corpus": ["c"]}),
            ("POST", "/api/v1/audits", {"folder": str(roots), "corpus": ["c" * 200_000]}),
        ):
            response = client.request(method, path, json=body)
            assert 400 <= response.status_code < 500, response.text[:300]
            assert len(response.content) < 3000, (path, response.status_code, len(response.content))


def test_openapi_documents_error_statuses(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            documented = set(op["responses"])
            assert {"413", "422", "500"} <= documented, (method, path, documented)
    assert "415" in spec["paths"]["/api/v1/audits"]["post"]["responses"]
    audit_id = next(
        p
        for p in spec["paths"]["/api/v1/audits/{audit_id}"]["get"]["parameters"]
        if p["name"] == "audit_id"
    )
    assert audit_id["schema"]["maximum"] == 2**31 - 1 and audit_id["schema"]["minimum"] == 1


def test_deeply_nested_json_inside_uploaded_files_is_never_a_500(tmp_path: Path) -> None:
    import io
    import zipfile

    from apptest_support import png_bytes

    home = new_home(tmp_path)
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("a.png", png_bytes(1))
        zf.writestr("manifest.jsonl", b'{"path": "a.png"}\n' + deep + b"\n")
    with api_client(home) as client:
        names = client.post(
            "/api/v1/audits",
            data={"corpus": "c"},
            files={"split": ("s.zip", archive.getvalue()), "label_names": ("n.json", deep)},
        )
        assert 400 <= names.status_code < 500, names.text  # unknown corpus or bad names file
    from splitaudit.indexer.sources.manifest import ManifestSource

    (tmp_path / "m.jsonl").write_bytes(b'{"path": "a.png"}\n' + deep + b"\n")
    source = ManifestSource(tmp_path / "m.jsonl")
    records = [r for shard in source.shards() for r in source.records(shard)]
    assert "nested too deeply" in (records[1].error or "")


@pytest.mark.postgres
def test_nul_characters_are_400_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL text cannot hold NUL: such a value in a path, query or body is a bad request."""
    with api_client(tmp_path / "home", database_url=pg_url) as client:
        for url in ("/api/v1/jobs?kind=a%00b", "/api/v1/corpora/a%00b", "/ui/corpora/a%00b"):
            assert_error(client.get(url), 400, "bad_request", contains="NUL")
        created = client.post("/api/v1/corpora", json={"name": "ok", "model": "x\x00y"})
        assert_error(created, 400, "bad_request")
        assert client.get("/api/v1/corpora").json()["total"] == 0  # nothing was stored
