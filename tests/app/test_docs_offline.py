"""``/docs`` and ``/redoc`` load every script, style and icon from the server itself (no CDN)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_support import api_client, new_home

from splitaudit.app.api.docs_offline import ASSETS, assets_dir

REF = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")
URL_IN_CODE = re.compile(r"""url:\s*['"]([^'"]+)['"]""")


@pytest.mark.parametrize(
    ("page", "needed"),
    [("/docs", {"swagger-ui-bundle.js", "swagger-ui.css"}), ("/redoc", {"redoc.standalone.js"})],
)
def test_docs_pages_load_only_local_assets(tmp_path: Path, page: str, needed: set[str]) -> None:
    with api_client(new_home(tmp_path)) as client:
        response = client.get(page)
        assert response.status_code == 200
        html = response.text
        refs = REF.findall(html) + URL_IN_CODE.findall(html)
        assert refs
        assert not [r for r in refs if r.startswith(("http:", "https:", "//"))], refs
        assert "googleapis" not in html and "jsdelivr" not in html
        assert {r.rsplit("/", 1)[-1] for r in refs if r.startswith("/docs/assets/")} >= needed
        for ref in refs:
            fetched = client.get(ref)
            assert fetched.status_code == 200, ref
            if ref.endswith(".js"):
                assert fetched.headers["content-type"].startswith("text/javascript")
                assert len(fetched.content) > 100_000  # the real bundle, not a stub
        assert client.get("/openapi.json").status_code == 200


def test_docs_assets_are_the_shipped_files_only(tmp_path: Path) -> None:
    for name in ASSETS:
        assert (assets_dir() / name).is_file()
    with api_client(new_home(tmp_path)) as client:
        css = client.get("/docs/assets/swagger-ui.css")
        assert css.content == (assets_dir() / "swagger-ui.css").read_bytes()
        missing = client.get("/docs/assets/..%2f__init__.py")
        assert missing.status_code == 404
        assert set(missing.json()) == {"error"}
        assert client.get("/docs/assets/core.py").status_code == 404
        spec = client.get("/openapi.json").json()
        assert not [p for p in spec["paths"] if p.startswith(("/docs", "/redoc"))]
        assert client.get("/docs/oauth2-redirect").status_code == 200
