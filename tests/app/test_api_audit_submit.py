"""Submitting audits: archive uploads (multipart) and server paths (JSON), and every bad input."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from apptest_support import (
    api_client,
    assert_error,
    jpeg_bytes,
    new_home,
    png_bytes,
    tar_bytes,
    workspace,
    zip_bytes,
)
from fastapi.testclient import TestClient

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Audit, Corpus, Job, Split

IMAGES = {
    "cat/a.jpg": jpeg_bytes(1, (64, 48)),
    "cat/b.jpg": jpeg_bytes(2, (64, 48)),
    "dog/c.png": png_bytes(3),
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with two (empty) corpora, 'web' and 'books'."""
    path = new_home(tmp_path)
    ws = workspace(path)
    try:
        with transaction(ws.sessions) as s:
            s.add_all([Corpus(name="web", generation=0), Corpus(name="books", generation=0)])
    finally:
        ws.close()
    return path


@pytest.fixture
def client(home: Path, tmp_path: Path) -> Iterator[TestClient]:
    roots = tmp_path / "data"
    roots.mkdir()
    with api_client(home, source_roots=[roots], max_upload_mb=1) as c:
        yield c


def _rows(home: Path) -> tuple[int, int, int]:
    ws = workspace(home)
    try:
        with ws.sessions() as s:
            return s.query(Split).count(), s.query(Audit).count(), s.query(Job).count()
    finally:
        ws.close()


def _leftovers(home: Path) -> list[str]:
    splits = home / "splits"
    return sorted(p.name for p in splits.iterdir()) if splits.exists() else []


def _upload(
    client: TestClient,
    archive: bytes,
    *,
    name: str = "split.zip",
    data: dict[str, object] | None = None,
    files: dict[str, object] | None = None,
) -> object:
    payload: dict[str, object] = {"split": (name, archive, "application/octet-stream")}
    payload.update(files or {})
    return client.post(
        "/api/v1/audits", files=payload, data=data if data is not None else {"corpus": "web"}
    )


def test_upload_zip_is_unpacked_and_queued(client: TestClient, home: Path) -> None:
    thresholds = {"phash_hamming": 6}
    response = _upload(
        client,
        zip_bytes(IMAGES),
        data={
            "corpus": ["web", "books,web"],
            "name": "my test",
            "thresholds": json.dumps(thresholds),
        },
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "queued" and body["kind"] == "audit"
    assert response.headers["location"] == f"/api/v1/audits/{body['id']}"
    audit = client.get(f"/api/v1/audits/{body['id']}").json()
    assert audit["status"] == "queued" and audit["corpora"] == ["web", "books"]
    assert audit["split"]["name"] == "my test" and audit["thresholds"]["phash_hamming"] == 6
    ws = workspace(home)
    try:
        with ws.sessions() as s:
            split = s.get_one(Split, audit["split"]["id"])
            root = Path(split.root)
    finally:
        ws.close()
    assert root.is_relative_to(home / "splits")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == sorted(
        IMAGES
    )
    assert not list(root.parent.parent.glob("part*"))  # the uploaded archive itself is not kept


def test_upload_targz_with_labels_file(client: TestClient, home: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tf:
        for name, data in {
            "imgs/x1.jpg": IMAGES["cat/a.jpg"],
            "imgs/x2.png": IMAGES["dog/c.png"],
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    labels = b"key,label\nx1.jpg,tabby cat\nx2.png,beagle\n"
    response = _upload(
        client,
        out.getvalue(),
        name="split.tar.gz",
        files={"labels": ("labels.csv", labels, "text/csv")},
    )
    assert response.status_code == 202, response.text
    ws = workspace(home)
    try:
        with ws.sessions() as s:
            split = s.query(Split).one()
            assert split.labels == {"x1.jpg": "tabby cat", "x2.png": "beagle"}
    finally:
        ws.close()


def _audit_params(home: Path) -> dict[str, object]:
    ws = workspace(home)
    try:
        with ws.sessions() as s:
            return dict(s.query(Audit).one().params)
    finally:
        ws.close()


def test_upload_with_label_names_file(client: TestClient, home: Path) -> None:
    names = json.dumps({"0": "cat|tabby cat", "1": ["dog"]}).encode()
    response = _upload(
        client, zip_bytes(IMAGES), files={"label_names": ("names.json", names, "application/json")}
    )
    assert response.status_code == 202, response.text
    assert _audit_params(home)["label_names"] == {"0": ["cat", "tabby cat"], "1": ["dog"]}


def test_bad_label_names_file_names_the_upload(client: TestClient, home: Path) -> None:
    response = _upload(
        client, zip_bytes(IMAGES), files={"label_names": ("names.json", b"{}", "application/json")}
    )
    error = assert_error(response, 422, "bad_input", contains="label_names (names.json)")
    assert str(home) not in error["message"]
    assert _leftovers(home) == [] and _rows(home) == (0, 0, 0)


@pytest.mark.parametrize(
    ("archive", "name", "status", "code", "text"),
    [
        (
            b"this is not an archive at all",
            "split.zip",
            422,
            "bad_input",
            "not a zip or tar archive",
        ),
        (b"", "split.zip", 422, "bad_input", "empty"),
        (zip_bytes({}), "split.zip", 422, "bad_input", "no images"),
        (zip_bytes({"notes.txt": b"hello"}), "split.zip", 422, "bad_input", "no images"),
        (zip_bytes({"../evil.jpg": IMAGES["cat/a.jpg"]}), "split.zip", 422, "unsafe_archive", ".."),
        (
            zip_bytes({"/etc/evil.jpg": IMAGES["cat/a.jpg"]}),
            "split.zip",
            422,
            "unsafe_archive",
            "absolute",
        ),
        (
            tar_bytes({"a/../../evil.jpg": IMAGES["cat/a.jpg"]}),
            "split.tar",
            422,
            "unsafe_archive",
            "..",
        ),
    ],
)
def test_bad_archives_are_refused_and_nothing_stays(
    client: TestClient, home: Path, archive: bytes, name: str, status: int, code: str, text: str
) -> None:
    assert_error(_upload(client, archive, name=name), status, code, contains=text)
    assert _leftovers(home) == [] and _rows(home) == (0, 0, 0)


def test_symlink_member_is_refused(client: TestClient, home: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tf:
        link = tarfile.TarInfo("cat/passwd.jpg")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tf.addfile(link)
    assert_error(
        _upload(client, out.getvalue(), name="s.tar"), 422, "unsafe_archive", contains="link"
    )
    assert _leftovers(home) == []


def test_archive_bomb_is_refused(home: Path) -> None:
    bomb = zip_bytes({"cat/zeros.jpg": b"\0" * (3 * 1024 * 1024)})
    with api_client(home, max_unpacked_mb=1) as client:
        assert_error(_upload(client, bomb), 422, "bad_input", contains="allowed")
    assert _leftovers(home) == []


def test_manifest_inside_archive_cannot_point_outside_it(
    client: TestClient, home: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(IMAGES["cat/a.jpg"])
    manifest = json.dumps({"path": str(secret), "key": "s"}).encode() + b"\n"
    archive = zip_bytes({"manifest.jsonl": manifest, "a.jpg": IMAGES["cat/b.jpg"]})
    assert_error(_upload(client, archive), 403, "path_not_allowed", contains="outside")
    archive = zip_bytes(
        {"manifest.jsonl": b'{"path": "../../secret.jpg"}\n', "a.jpg": IMAGES["cat/b.jpg"]}
    )
    assert_error(_upload(client, archive), 403, "path_not_allowed")
    assert _leftovers(home) == [] and _rows(home) == (0, 0, 0)


@pytest.mark.parametrize(
    ("data", "files", "status", "code", "text"),
    [
        ({"corpus": "nope"}, {}, 404, "not_found", "corpus 'nope' does not exist"),
        ({}, {}, 400, "bad_request", "at least one corpus"),
        ({"corpus": "web", "thresholds": "{not json"}, {}, 400, "bad_request", "not valid JSON"),
        ({"corpus": "web", "thresholds": "[1, 2]"}, {}, 400, "bad_request", "JSON object"),
        (
            {"corpus": "web", "thresholds": '{"phash_hamming": 99}'},
            {},
            400,
            "bad_request",
            "phash_hamming",
        ),
        (
            {"corpus": "web", "thresholds": '{"fuzz": 1}'},
            {},
            400,
            "bad_request",
            "unknown threshold",
        ),
        ({"corpus": "web", "colour": "red"}, {}, 400, "bad_request", "unknown form field"),
        (
            {"corpus": "web"},
            {"labels": ("l.csv", b"key,label\nk\n", "text/csv")},
            422,
            "bad_input",
            "line 2",
        ),
        (
            {"corpus": "web"},
            {"split2": ("b.zip", b"x", "application/zip")},
            400,
            "bad_request",
            "unknown form field",
        ),
    ],
)
def test_bad_form_fields(
    client: TestClient,
    home: Path,
    data: dict[str, object],
    files: dict[str, object],
    status: int,
    code: str,
    text: str,
) -> None:
    assert_error(
        _upload(client, zip_bytes(IMAGES), data=data, files=files), status, code, contains=text
    )
    assert _leftovers(home) == [] and _rows(home) == (0, 0, 0)


def test_split_field_missing(client: TestClient, home: Path) -> None:
    response = client.post(
        "/api/v1/audits", files={"labels": ("l.csv", b"k,v\n", "text/csv")}, data={"corpus": "web"}
    )
    assert_error(response, 400, "bad_request", contains="'split'")
    assert _leftovers(home) == []


def test_upload_over_limit_is_413_from_content_length(client: TestClient, home: Path) -> None:
    big = zip_bytes({"cat/big.jpg": bytes(range(256)) * 8192})  # 2 MB stored, limit is 1 MB
    assert_error(_upload(client, big), 413, "upload_too_large", contains="SPLITAUDIT_MAX_UPLOAD_MB")
    assert _leftovers(home) == [] and _rows(home) == (0, 0, 0)


def test_upload_over_limit_is_413_while_streaming(client: TestClient, home: Path) -> None:
    boundary = "XbOuNdArY"
    sent: list[int] = []

    def body() -> Iterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="corpus"\r\n\r\nweb\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="split"; filename="s.zip"\r\n'
            "Content-Type: application/zip\r\n\r\n"
        ).encode()
        for _ in range(64):  # 4 MB in 64 KB chunks, no Content-Length
            sent.append(1)
            yield b"z" * 65536
        yield f"\r\n--{boundary}--\r\n".encode()

    response = client.post(
        "/api/v1/audits",
        content=body(),
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    assert_error(response, 413, "upload_too_large")
    assert _leftovers(home) == []


def test_wrong_content_types(client: TestClient) -> None:
    assert_error(
        client.post("/api/v1/audits", content=b"x", headers={"content-type": "text/plain"}),
        415,
        "unsupported_media_type",
        contains="multipart/form-data",
    )
    assert_error(client.post("/api/v1/audits", content=b"x"), 415, "unsupported_media_type")
    assert_error(
        client.post(
            "/api/v1/audits", content=b"--x--", headers={"content-type": "multipart/form-data"}
        ),
        422,
        "bad_input",
        contains="boundary",
    )


# ---------------------------------------------------------------- JSON: splits already on the server


def _server_split(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "data"
    folder = root / "split"
    for name, data in IMAGES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    manifest = root / "test.jsonl"
    manifest.write_text(
        "".join(json.dumps({"path": f"split/{k}", "label": k.split("/")[0]}) + "\n" for k in IMAGES)
    )
    return folder, manifest


def test_json_manifest_and_folder_under_root(
    client: TestClient, home: Path, tmp_path: Path
) -> None:
    folder, manifest = _server_split(tmp_path)
    by_manifest = client.post("/api/v1/audits", json={"manifest": str(manifest), "corpus": "web"})
    by_folder = client.post(
        "/api/v1/audits",
        json={
            "folder": str(folder),
            "corpus": ["web", "books"],
            "name": "server split",
            "labels": {"a.jpg": "lynx"},
            "label_names": {"cat": "cat|kitty"},
        },
    )
    assert by_manifest.status_code == 202, by_manifest.text
    assert by_folder.status_code == 202, by_folder.text
    second = client.get(f"/api/v1/audits/{by_folder.json()['id']}").json()
    assert second["split"]["name"] == "server split" and second["corpora"] == ["web", "books"]
    ws = workspace(home)
    try:
        with ws.sessions() as s:
            audit = s.get_one(Audit, by_folder.json()["id"])
            assert audit.params["label_names"] == {"cat": ["cat", "kitty"]}
            assert s.get_one(Split, audit.split_id).labels == {"a.jpg": "lynx"}
    finally:
        ws.close()
    assert _leftovers(home) == []  # nothing copied: the split is read where it lies


def test_json_paths_outside_roots_are_forbidden(
    client: TestClient, home: Path, tmp_path: Path
) -> None:
    _folder, manifest = _server_split(tmp_path)
    outside = tmp_path / "outside.jsonl"
    outside.write_text(manifest.read_text())
    assert_error(
        client.post("/api/v1/audits", json={"manifest": str(outside), "corpus": "web"}),
        403,
        "path_not_allowed",
        contains="source roots",
    )
    sneaky = manifest.parent / "sneaky.jsonl"
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(IMAGES["cat/a.jpg"])
    sneaky.write_text(json.dumps({"path": str(secret)}) + "\n")
    assert_error(
        client.post("/api/v1/audits", json={"manifest": str(sneaky), "corpus": "web"}),
        403,
        "path_not_allowed",
        contains="secret.jpg",
    )
    remote = manifest.parent / "remote.jsonl"
    remote.write_text(json.dumps({"url": "http://169.254.169.254/latest"}) + "\n")
    assert_error(
        client.post("/api/v1/audits", json={"manifest": str(remote), "corpus": "web"}),
        403,
        "path_not_allowed",
        contains="URL",
    )
    assert _rows(home) == (0, 0, 0)


@pytest.mark.parametrize(
    ("body", "status", "code", "text"),
    [
        ({"corpus": "web"}, 422, "invalid_request", "exactly one of 'manifest' or 'folder'"),
        (
            {"manifest": "/a.jsonl", "folder": "/b", "corpus": "web"},
            422,
            "invalid_request",
            "exactly one",
        ),
        ({"manifest": "/a.jsonl"}, 422, "invalid_request", "corpus"),
        ({"manifest": "relative.jsonl", "corpus": "web"}, 400, "bad_request", "absolute"),
    ],
)
def test_json_body_validation(
    client: TestClient, body: dict[str, object], status: int, code: str, text: str
) -> None:
    assert_error(client.post("/api/v1/audits", json=body), status, code, contains=text)


def test_json_malformed_missing_and_no_roots(
    client: TestClient, home: Path, tmp_path: Path
) -> None:
    assert_error(
        client.post(
            "/api/v1/audits", content=b'{"manifest": ', headers={"content-type": "application/json"}
        ),
        400,
        "bad_request",
        contains="not valid JSON",
    )
    missing = tmp_path / "data" / "nope.jsonl"
    assert_error(
        client.post("/api/v1/audits", json={"manifest": str(missing), "corpus": "web"}),
        422,
        "bad_input",
    )
    empty = tmp_path / "data" / "empty"
    empty.mkdir()
    assert_error(
        client.post("/api/v1/audits", json={"folder": str(empty), "corpus": "web"}),
        422,
        "bad_input",
        contains="no images",
    )
    with api_client(home) as no_roots:
        assert_error(
            no_roots.post("/api/v1/audits", json={"folder": str(empty), "corpus": "web"}),
            403,
            "path_not_allowed",
            contains="upload",
        )
