"""``/`` sends a browser to the review UI, which ``create_app`` always mounts."""

from __future__ import annotations

from pathlib import Path

from apptest_support import api_client, new_home


def test_root_redirects_to_the_review_ui(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        root = client.get("/", follow_redirects=False)
        ui = client.get("/ui")
    assert root.status_code == 307 and root.headers["location"] == "/ui"
    assert ui.status_code == 200 and "text/html" in ui.headers["content-type"]
