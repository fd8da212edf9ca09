"""REST corpus sources never read through symlinks out of the source roots (at submit and when
the job runs), and a model named over REST is a registry name or lies under a models root."""

from __future__ import annotations

import os
from pathlib import Path

from apptest_support import api_client, assert_error, new_home, png_bytes, workspace
from sqlalchemy import select

from splitaudit.indexer.db.models import FailedItem, Item
from splitaudit.indexer.jobs.worker import Worker
from splitaudit.indexer.runtime.handlers import default_handlers


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "data", tmp_path / "outside"
    (root / "photos").mkdir(parents=True)
    outside.mkdir()
    (root / "photos" / "a.png").write_bytes(png_bytes(1))
    (outside / "secret.png").write_bytes(png_bytes(2))
    return root, outside


def test_a_source_folder_linking_out_of_the_roots_is_refused_without_naming_the_target(
    tmp_path: Path,
) -> None:
    root, outside = _tree(tmp_path)
    os.symlink(outside / "secret.png", root / "photos" / "x.png")
    with api_client(new_home(tmp_path), source_roots=[root]) as client:
        body = {"sources": [str(root / "photos")], "no_embed": True}
        for response in (
            client.post("/api/v1/corpora", json={"name": "web", **body}),
            client.post("/api/v1/corpora", json={"name": "web2"}) and None,
            client.post("/api/v1/corpora/web2/sources", json=body),
        ):
            if response is None:
                continue
            error = assert_error(response, 403, "path_not_allowed", contains="x.png")
            assert str(outside) not in error["message"] and "secret" not in error["message"]


def test_a_link_swapped_in_after_submission_is_never_read(tmp_path: Path) -> None:
    root, outside = _tree(tmp_path)
    home = new_home(tmp_path)
    with api_client(home, source_roots=[root]) as client:
        created = client.post(
            "/api/v1/corpora",
            json={"name": "web", "sources": [str(root / "photos")], "no_embed": True},
        )
        assert created.status_code == 201, created.text
    os.symlink(outside / "secret.png", root / "photos" / "x.png")  # after acceptance
    os.symlink("/etc/passwd", root / "photos" / "p.png")
    ws = workspace(home)
    try:
        assert Worker(ws, default_handlers(), poll_s=0.01).run_once()
        with ws.sessions() as s:
            keys = s.scalars(select(Item.key)).all()
            failed = {f.key: f.reason for f in s.scalars(select(FailedItem))}
    finally:
        ws.close()
    assert keys == ["a.png"]
    assert set(failed) == {"x.png", "p.png"}
    for reason in failed.values():
        assert "path not allowed" in reason and "bytes" not in reason


def test_a_model_over_rest_is_a_registry_name_or_under_a_models_root(tmp_path: Path) -> None:
    root, _ = _tree(tmp_path)
    models = tmp_path / "models"
    models.mkdir()
    (models / "m.pt").write_bytes(b"weights")
    with api_client(new_home(tmp_path), source_roots=[root], models_roots=[models]) as client:
        messages = set()
        for n, spec in enumerate(
            (
                "ViT-B-32:/etc/passwd",
                "ViT-B-32:/no/such/file.pt",
                "/etc",
                "local-dir:/root",
                "ViT-B-32:~/m.pt",
                f"ViT-B-32:{models}/../outside.pt",
            )
        ):
            error = assert_error(
                client.post("/api/v1/corpora", json={"name": f"c{n}", "model": spec}),
                403,
                "path_not_allowed",
            )
            messages.add(error["message"].replace(spec, "SPEC"))
        assert len(messages) == 1  # one message: existence is never revealed
        assert "SPLITAUDIT_MODELS_ROOTS" in messages.pop()
        for n, spec in enumerate(("ViT-B-32:laion2b_s34b_b79k", f"ViT-B-32:{models}/m.pt")):
            created = client.post("/api/v1/corpora", json={"name": f"ok{n}", "model": spec})
            assert created.status_code == 201, created.text
        client.post("/api/v1/corpora", json={"name": "plain", "no_embed": True})
        added = client.post(
            "/api/v1/corpora/plain/sources",
            json={
                "sources": [str(root / "photos")],
                "model": "ViT-B-32:/etc/passwd",
                "no_embed": False,
            },
        )
        assert_error(added, 403, "path_not_allowed")
