"""Schemathesis over the live OpenAPI spec: every operation, valid and invalid input, no 5xx, schema conformance."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import new_home, seed_audit

from bench.fuzz_api import fuzz, live_server
from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings

pytestmark = pytest.mark.slow
EXAMPLES = 12  # per operation and generation mode: the whole module stays around a minute or two
TOKENS = {"ci": "tok-ci-0123456789abc"}


@pytest.mark.parametrize(
    ("with_token", "send_token", "postgres"),
    [(False, False, False), (True, True, False), (True, False, False), (True, True, True)],
    ids=["no-auth", "token", "token-missing", "token-postgresql"],
)
def test_fuzzed_requests_get_documented_statuses_and_never_a_5xx(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    with_token: bool,
    send_token: bool,
    postgres: bool,
) -> None:
    if postgres:  # PostgreSQL refuses what SQLite takes (NUL in text, ids past 2**31)
        home, database_url = tmp_path / "home", request.getfixturevalue("pg_url")
    else:
        home, database_url = new_home(tmp_path), None
        seed_audit(home, tmp_path / "files")
    roots = tmp_path / "roots"
    roots.mkdir()
    settings = ApiSettings(
        home=home,
        database_url=database_url,
        run_worker=False,
        source_roots=[roots],
        api_tokens=TOKENS if with_token else {},
    )
    with live_server(create_app(settings)) as base_url:
        result = fuzz(
            base_url,
            max_examples=EXAMPLES,
            headers={"Authorization": "Bearer tok-ci-0123456789abc"} if send_token else None,
        )
    assert result.requests > 200, result.statuses
    assert result.server_errors == 0, result.failures
    assert result.failures == {}, "\n".join(f"{k}\n    {v}" for k, v in result.failures.items())
    if with_token and not send_token:  # everything but /health refuses, in the documented shape
        assert set(result.statuses) <= {200, 400, 401, 404, 405, 413, 422}, result.statuses
        assert result.statuses[401] > result.requests // 2
    else:  # the token (or no auth at all) is accepted everywhere
        assert result.statuses[401] == 0
