"""Server-mode client against an httpx.MockTransport: upload, polling, report, error mapping."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import httpx
import pytest

from splitaudit.indexer.errors import (
    AuthError,
    InputError,
    NotFoundError,
    ServerError,
    UploadTooLargeError,
    UsageError,
)
from splitaudit.indexer.gate.client import AuditClient


def parse_multipart(request: httpx.Request) -> dict[str, list[tuple[str | None, bytes]]]:
    """Form fields of a multipart request: name -> [(filename, payload)]."""
    body = request.read()
    msg = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + request.headers["content-type"].encode() + b"\r\n\r\n" + body
    )
    fields: dict[str, list[tuple[str | None, bytes]]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields.setdefault(name, []).append((part.get_filename(), part.get_payload(decode=True)))
    return fields


class FakeServer:
    """Records requests; answers like the splitaudit API."""

    def __init__(self, statuses: list[dict[str, Any]] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.uploads: list[dict[str, list[tuple[str | None, bytes]]]] = []
        self.statuses = statuses or [
            {"status": "queued", "progress": 0.0},
            {"status": "running", "progress": 0.5},
            {"status": "done", "progress": 1.0},
        ]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "POST" and request.url.path == "/api/v1/audits":
            self.uploads.append(parse_multipart(request))
            return httpx.Response(202, json={"id": 7})
        if request.url.path == "/api/v1/audits/7":
            return httpx.Response(200, json={"id": 7, **self.statuses.pop(0)})
        if request.url.path == "/api/v1/audits/7/report":
            assert request.url.params["format"] == "json"
            return httpx.Response(
                200, json={"schema": "splitaudit.report/v1", "items": [], "failed": []}
            )
        return httpx.Response(
            404, json={"error": {"code": "not_found", "message": "no such thing"}}
        )


def client(handler: Any, token: str | None = None) -> AuditClient:
    return AuditClient("http://sa.test", token=token, transport=httpx.MockTransport(handler))


def make_split(root: Path) -> Path:
    (root / "cats").mkdir(parents=True)
    (root / "cats" / "1.jpg").write_bytes(b"\xff\xd8jpeg-one")
    (root / "cats" / "1.txt").write_text("a cat")
    (root / ".DS_Store").write_bytes(b"junk")
    return root


def test_folder_is_zipped_on_the_fly_and_fields_are_sent(tmp_path: Path) -> None:
    server = FakeServer()
    split = make_split(tmp_path / "split")
    labels = tmp_path / "labels.csv"
    labels.write_text("key,label\ncats/1.jpg,cat\n")
    seen: list[int] = []
    totals: list[int] = []

    def progress(total: int) -> Any:
        totals.append(total)
        return seen.append

    with client(server, token="s3cret") as c:
        audit_id = c.submit(
            split,
            corpora=["laion", "coco"],
            labels=labels,
            thresholds={"semantic": 0.9},
            progress=progress,
        )
    assert audit_id == 7
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer s3cret"
    assert request.headers.get("transfer-encoding") == "chunked"  # streamed: size unknown up front
    fields = server.uploads[0]
    assert [v for _f, v in fields["corpus"]] == [b"laion", b"coco"]
    assert json.loads(fields["thresholds"][0][1]) == {"semantic": 0.9}
    assert fields["labels"][0] == ("labels.csv", labels.read_bytes())
    filename, payload = fields["split"][0]
    assert filename == "split.zip"
    with zipfile.ZipFile(io.BytesIO(payload)) as zf:
        assert sorted(zf.namelist()) == ["cats/1.jpg", "cats/1.txt"]
        assert zf.read("cats/1.jpg") == b"\xff\xd8jpeg-one"
    assert totals == [len(b"\xff\xd8jpeg-one") + len(b"a cat")]
    assert sum(seen) == totals[0]


def test_archive_is_uploaded_as_is(tmp_path: Path) -> None:
    server = FakeServer()
    archive = tmp_path / "split.tar"
    with tarfile.open(archive, "w") as tf:
        tf.add(make_split(tmp_path / "s") / "cats" / "1.jpg", arcname="cats/1.jpg")
    seen: list[int] = []
    with client(server) as c:
        c.submit(archive, corpora=["laion"], progress=lambda total: seen.append)
    assert server.uploads[0]["split"][0] == ("split.tar", archive.read_bytes())
    assert "authorization" not in server.requests[0].headers
    assert int(server.requests[0].headers["content-length"]) > archive.stat().st_size
    assert sum(seen) == archive.stat().st_size


def test_manifest_is_refused_in_server_mode(tmp_path: Path) -> None:
    manifest = tmp_path / "test.csv"
    manifest.write_text("path\n1.jpg\n")
    with (
        client(FakeServer()) as c,
        pytest.raises(UsageError, match="uploads a folder or a zip/tar archive"),
    ):
        c.submit(manifest, corpora=["laion"])


def test_missing_split_is_an_input_error(tmp_path: Path) -> None:
    with client(FakeServer()) as c, pytest.raises(InputError, match="does not exist"):
        c.submit(tmp_path / "nope", corpora=["laion"])


def test_wait_polls_until_done_and_reports_progress() -> None:
    server = FakeServer()
    progress: list[tuple[float, str]] = []
    sleeps: list[float] = []
    with client(server) as c:
        state = c.wait(7, on_progress=lambda f, m: progress.append((f, m)), sleep=sleeps.append)
        report = c.report(7)
    assert state["status"] == "done"
    assert [f for f, _m in progress] == [0.0, 0.5, 1.0]
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0]  # backs off
    assert report["schema"] == "splitaudit.report/v1"


def test_failed_audit_is_a_server_error_with_the_reason() -> None:
    server = FakeServer([{"status": "failed", "progress": 0.3, "error": "index missing"}])
    with (
        client(server) as c,
        pytest.raises(ServerError, match="audit 7 failed on the server: index missing"),
    ):
        c.wait(7, sleep=lambda _s: None)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, AuthError),
        (403, AuthError),
        (404, NotFoundError),
        (413, UploadTooLargeError),
        (422, InputError),
        (500, ServerError),
        (503, ServerError),
    ],
)
def test_status_codes_map_to_errors_with_the_server_message(
    status: int, error: type[Exception]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, json={"error": {"code": "x", "message": "corpus 'nope' does not exist"}}
        )

    with client(handler) as c, pytest.raises(error, match="corpus 'nope' does not exist"):
        c.status(7)


def test_non_json_error_body_is_quoted() -> None:
    with (
        client(lambda r: httpx.Response(502, text="Bad Gateway from nginx")) as c,
        pytest.raises(ServerError, match=r"502.*Bad Gateway from nginx"),
    ):
        c.report(7)


def test_connection_failure_is_a_server_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with (
        client(handler) as c,
        pytest.raises(ServerError, match=r"cannot reach the splitaudit server at http://sa\.test"),
    ):
        c.status(7)


def test_wait_retries_a_few_transport_failures() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise httpx.ConnectError("restarting", request=request)
        return httpx.Response(200, json={"id": 7, "status": "done", "progress": 1.0})

    with client(handler) as c:
        assert c.wait(7, sleep=lambda _s: None)["status"] == "done"
    assert calls["n"] == 3


def test_report_that_is_not_a_report_is_a_server_error() -> None:
    with (
        client(lambda r: httpx.Response(200, json={"hello": 1})) as c,
        pytest.raises(ServerError, match="not a splitaudit report"),
    ):
        c.report(7)


def test_bad_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="http"):
        AuditClient("localhost:8000")
