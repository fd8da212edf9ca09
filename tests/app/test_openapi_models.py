"""Every REST route documents what it answers: a response model for JSON, the real media type otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apptest_support import new_home

from splitaudit.app.main import create_app
from splitaudit.app.settings import ApiSettings


def _success(op: dict[str, Any]) -> dict[str, Any]:
    responses = op.get("responses", {})
    return next(responses[c] for c in ("200", "201", "202") if c in responses)


def test_every_route_declares_a_model_or_its_media_types(tmp_path: Path) -> None:
    app = create_app(ApiSettings(home=new_home(tmp_path), run_worker=False))
    paths = app.openapi()["paths"]
    untyped, routes = [], 0
    for path, ops in paths.items():
        for method, op in ops.items():
            routes += 1
            content = _success(op).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if schema is not None:
                ok = (
                    "$ref" in schema
                )  # a named model, not {type: object, additionalProperties: true}
            else:
                ok = bool(content) and all(t.split("/")[0] in ("text", "image") for t in content)
            if not ok:
                untyped.append(f"{method.upper()} {path}: {content}")
    assert routes >= 23
    assert not untyped, "routes without a response model or media type:\n" + "\n".join(untyped)
    report = paths["/api/v1/audits/{audit_id}/report"]["get"]
    assert _success(report)["content"]["application/json"]["schema"]["$ref"].endswith("/Report")
    assert "text/csv; charset=utf-8" in _success(report)["content"]
    thumb = _success(paths["/api/v1/items/{item_id}/thumbnail"]["get"])["content"]
    assert set(thumb) == {"image/jpeg", "image/png"}
