"""Ids and page numbers are bounded on every route: out-of-range ids 404, out-of-range pages 422."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import api_client, assert_error, new_home

from splitaudit.app.params import MAX_ID

HUGE = 9223372036854775808  # 2**63: Python int fine, SQLite/PostgreSQL overflow
OUT_OF_RANGE_IDS = (0, -1, MAX_ID + 1, HUGE, 10**40)
ID_ROUTES = (
    ("GET", "/api/v1/audits/{id}"),
    ("GET", "/api/v1/audits/{id}/report"),
    ("GET", "/api/v1/audits/{id}/matches"),
    ("GET", "/api/v1/matches/{id}"),
    ("PUT", "/api/v1/matches/{id}/review"),
    ("GET", "/api/v1/items/{id}/thumbnail"),
    ("GET", "/api/v1/split-items/{id}/thumbnail"),
    ("GET", "/api/v1/jobs/{id}"),
)
UI_ID_ROUTES = (
    "/ui/audits/{id}",
    "/ui/audits/{id}/matches",
    "/ui/audits/{id}/review/1",
    "/ui/audits/1/review/{id}",
    "/ui/matches/{id}",
    "/ui/audits/{id}/export.csv",
)
PAGE_ROUTES = (
    "/api/v1/audits?page={p}",
    "/api/v1/audits?page_size={p}",
    "/api/v1/audits/1/matches?page={p}",
    "/api/v1/jobs?page={p}",
    "/api/v1/corpora/x?failed_page={p}",
    "/ui?page={p}",
    "/ui/audits/1/matches?page={p}",
    "/ui/corpora/x?page={p}",
)


def _check_every_route(client: object, ids: tuple[int, ...]) -> None:
    for method, template in ID_ROUTES:
        for value in ids:
            response = client.request(
                method,
                template.format(id=value),  # type: ignore[attr-defined]
                json={"verdict": "duplicate"} if method == "PUT" else None,
            )
            error = assert_error(response, 404, "not_found")
            assert len(error["message"]) < 200, error


@pytest.mark.parametrize("value", OUT_OF_RANGE_IDS)
def test_out_of_range_ids_are_404_on_every_api_route(tmp_path: Path, value: int) -> None:
    with api_client(new_home(tmp_path)) as client:
        _check_every_route(client, (value,))


def test_in_range_unknown_ids_are_404_too(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        _check_every_route(client, (1, MAX_ID))


@pytest.mark.parametrize("template", UI_ID_ROUTES)
def test_out_of_range_ids_are_404_pages_in_the_ui(tmp_path: Path, template: str) -> None:
    with api_client(new_home(tmp_path)) as client:
        for value in (HUGE, MAX_ID + 1, 0):
            response = client.get(template.format(id=value))
            assert response.status_code == 404, (template, value, response.text[:300])
            assert response.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("template", PAGE_ROUTES)
def test_out_of_range_pages_are_422(tmp_path: Path, template: str) -> None:
    with api_client(new_home(tmp_path)) as client:
        for value in (3527373375366216704, MAX_ID + 1, 0):
            response = client.get(template.format(p=value))
            assert response.status_code == 422, (template, value, response.text[:300])


@pytest.mark.postgres
def test_ids_at_and_past_2_31_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL INTEGER columns refuse 2**31 (DataError) and pages reach OFFSET as BIGINT."""
    with api_client(tmp_path / "home", database_url=pg_url) as client:
        _check_every_route(client, (MAX_ID, MAX_ID + 1, HUGE))
        for template in (
            "/api/v1/audits?page={p}",
            "/api/v1/jobs?page={p}",
            "/api/v1/audits/1/matches?page={p}",
        ):
            last = client.get(template.format(p=MAX_ID) + "&page_size=500")
            assert last.status_code in (200, 404), last.text
            assert last.status_code == 404 or last.json()["items"] == []
            assert client.get(template.format(p=MAX_ID + 1)).status_code == 422
        assert client.get(f"/ui/audits/{MAX_ID + 1}").status_code == 404
