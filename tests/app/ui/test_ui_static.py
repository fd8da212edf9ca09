"""The UI's static files come from Starlette's ``StaticFiles``: validators, 304s and HEAD, cached for a day."""

from __future__ import annotations

from pathlib import Path

from ui_support import new_home, ui_client


def test_static_files_answer_conditional_and_head_requests(tmp_path: Path) -> None:
    with ui_client(new_home(tmp_path)) as client:
        first = client.get("/ui/static/app.css")
        again = client.get("/ui/static/app.css", headers={"If-None-Match": first.headers["etag"]})
        head = client.head("/ui/static/app.js")
    assert first.status_code == 200 and first.headers["cache-control"] == "public, max-age=86400"
    assert again.status_code == 304 and again.content == b""
    assert (
        head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    )
