"""The one error shape: every library error, validation error, unknown route and crash."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import api_client, assert_error, new_home
from fastapi.testclient import TestClient

from splitaudit.app.errors import status_for
from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings
from splitaudit.app.thumbnails import SourceMissingError
from splitaudit.indexer import errors


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (errors.NotFoundError("x"), 404),
        (errors.UsageError("x"), 400),
        (errors.InputError("x"), 422),
        (errors.UnsafeArchiveError("x"), 422),
        (errors.PathNotAllowedError("x"), 403),
        (errors.UploadTooLargeError("x"), 413),
        (errors.AuthError("x"), 401),
        (errors.ConflictError("x"), 409),
        (errors.ModelMismatchError("x"), 409),
        (errors.ImageDecodeError("x"), 422),
        (errors.IndexMismatchError("x"), 500),
        (errors.ServerError("x"), 500),
        (errors.SplitauditError("x"), 500),
        (SourceMissingError("x"), 404),
    ],
)
def test_status_for_every_library_error(exc: errors.SplitauditError, status: int) -> None:
    assert status_for(exc) == status


def _app_raising(tmp_path: Path, exc: Exception) -> TestClient:
    app = create_app(ApiSettings(home=new_home(tmp_path), run_worker=False))

    @app.get("/raise")
    def boom() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (errors.PathNotAllowedError("outside the roots"), 403, "path_not_allowed"),
        (errors.ModelMismatchError("another model"), 409, "model_mismatch"),
        (errors.UnsafeArchiveError("member has '..'"), 422, "unsafe_archive"),
        (SourceMissingError("gone; sha256=abc"), 404, "source_missing"),
    ],
)
def test_library_error_becomes_error_shape_with_code_and_message(
    tmp_path: Path, exc: errors.SplitauditError, status: int, code: str
) -> None:
    with _app_raising(tmp_path, exc) as client:
        error = assert_error(client.get("/raise"), status, code)
    assert error["message"] == str(exc)


def test_auth_error_sends_www_authenticate(tmp_path: Path) -> None:
    with _app_raising(tmp_path, errors.AuthError("no token")) as client:
        response = client.get("/raise")
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_unexpected_exception_is_a_500_in_the_same_shape(tmp_path: Path) -> None:
    with _app_raising(tmp_path, RuntimeError("secret internals")) as client:
        error = assert_error(client.get("/raise"), 500, "internal_error")
    assert "secret internals" not in error["message"]
    assert "RuntimeError" in error["message"]


def test_unknown_route_and_wrong_method(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        assert_error(
            client.get("/api/v1/nothing-here"), 404, "not_found", contains="no such endpoint"
        )
        assert_error(client.delete("/api/v1/health"), 405, "method_not_allowed")


def test_validation_errors_share_the_shape(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        error = assert_error(client.get("/api/v1/audits/not-a-number"), 422, "invalid_request")
        assert "audit_id" in error["message"]
        error = assert_error(
            client.get("/api/v1/audits?page=0"), 422, "invalid_request", contains="page"
        )
        assert error["details"][0]["field"] == "page"
        assert_error(
            client.put(
                "/api/v1/matches/1/review",
                content=b"{not json",
                headers={"content-type": "application/json"},
            ),
            422,
            "invalid_request",
        )
