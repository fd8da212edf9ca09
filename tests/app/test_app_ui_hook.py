"""``create_app`` mounts ``app.ui.router`` when that module exists, and redirects ``/`` to it."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from apptest_support import api_client, new_home
from fastapi import APIRouter
from fastapi.responses import PlainTextResponse


def _fake_ui(monkeypatch: pytest.MonkeyPatch, *, factory: bool) -> None:
    package = types.ModuleType("app.ui")
    package.__path__ = []
    module = types.ModuleType("app.ui.router")

    def build() -> APIRouter:
        router = APIRouter()

        @router.get("/ui", response_class=PlainTextResponse)
        def ui_home() -> str:
            return "review ui"

        return router

    if factory:
        module.build_router = lambda settings: build()  # type: ignore[attr-defined]
    else:
        module.router = build()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "app.ui", package)
    monkeypatch.setitem(sys.modules, "app.ui.router", module)


@pytest.mark.parametrize("factory", [True, False])
def test_ui_router_is_included_when_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factory: bool) -> None:
    _fake_ui(monkeypatch, factory=factory)
    with api_client(new_home(tmp_path)) as client:
        assert client.get("/ui").text == "review ui"
        root = client.get("/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/ui"


def test_without_ui_root_redirects_to_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as if the package did not exist (even when the real one was imported earlier)
    monkeypatch.setitem(sys.modules, "app.ui", None)
    monkeypatch.setitem(sys.modules, "app.ui.router", None)
    with api_client(new_home(tmp_path)) as client:
        root = client.get("/", follow_redirects=False)
        assert client.get("/ui").status_code == 404
    assert root.headers["location"] == "/docs"
