"""Server settings from ``SPLITAUDIT_*`` variables; nothing is built at import time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from splitaudit.app.settings import ApiSettings


def test_settings_read_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPLITAUDIT_HOME", str(tmp_path))
    monkeypatch.setenv(
        "SPLITAUDIT_API_TOKENS", "alice:t1-0123456789abcdef, bob:t2-0123456789abcdef:read"
    )
    monkeypatch.setenv("SPLITAUDIT_SOURCE_ROOTS", "/data,/srv/splits")
    monkeypatch.setenv("SPLITAUDIT_MAX_UPLOAD_MB", "5")
    monkeypatch.setenv("SPLITAUDIT_MAX_JSON_MB", "0.5")
    monkeypatch.setenv("SPLITAUDIT_RUN_WORKER", "0")
    s = ApiSettings()
    assert s.home == tmp_path
    assert s.api_tokens == {"alice": "t1-0123456789abcdef", "bob": "t2-0123456789abcdef"}
    assert s.api_token_roles == {"bob": "read"}
    assert s.source_roots == [Path("/data"), Path("/srv/splits")]
    assert s.max_upload_bytes == 5 * 1024 * 1024
    assert s.max_json_bytes == 512 * 1024
    assert s.read_requires_token is True and s.run_worker is False and s.auth_enabled
    assert "t1-" not in repr(s)
    monkeypatch.setenv("SPLITAUDIT_PUBLIC_READ", "true")
    assert ApiSettings().read_requires_token is False  # the explicit opt-out for a public board


def test_defaults_have_auth_off(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SPLITAUDIT_API_TOKENS", "SPLITAUDIT_SOURCE_ROOTS", "SPLITAUDIT_RUN_WORKER"):
        monkeypatch.delenv(name, raising=False)
    s = ApiSettings()
    assert s.api_tokens == {} and not s.auth_enabled and s.source_roots == [] and s.run_worker


@pytest.mark.parametrize(
    "value",
    [
        "alice",
        "alice:",
        ":tok",
        "a:1,a:2",
        " ",
        "",
        "a:short",
        "a:0123456789abcde",
        "a:0123456789abcdef:read,b:",
    ],
)
def test_bad_token_lists_are_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="api_tokens"):
        ApiSettings(api_tokens=value)  # type: ignore[arg-type]


def test_blank_env_tokens_are_refused_and_errors_never_print_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPLITAUDIT_API_TOKENS", "  ")
    with pytest.raises(ValidationError, match="holds no token"):
        ApiSettings()
    monkeypatch.setenv("SPLITAUDIT_API_TOKENS", "a:leaky-but-short")
    with pytest.raises(ValidationError, match="at least 16 characters") as info:
        ApiSettings()
    assert "leaky-but-short" not in str(info.value)
    with pytest.raises(ValidationError, match="role"):
        ApiSettings(api_tokens={"a": "0123456789abcdef"}, api_token_roles={"a": "admin"})


def test_importing_the_app_builds_nothing() -> None:
    code = (
        "import sys, splitaudit.app.main, splitaudit.app.api.router\n"
        "import fastapi\n"
        "assert 'torch' not in sys.modules and 'faiss' not in sys.modules, 'heavy import'\n"
        "assert not hasattr(splitaudit.app.main, 'app'), 'module-level app instance'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
