"""Helpers for the API tests: a migrated DB template, app clients, seeded audits, archives."""

from __future__ import annotations

import io
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import photo
from helpers.app_home import app_client
from helpers.app_home import new_home as new_home  # re-exported for the tests

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Audit, Corpus, Item, Job, Match, Shard, Split, SplitItem
from splitaudit.indexer.workspace import Workspace

api_client = app_client


def workspace(home: Path) -> Workspace:
    """Open the home's workspace directly (to seed rows)."""
    return Workspace.open(home, migrate=False)


def png_bytes(seed: int, size: tuple[int, int] = (96, 64), *, alpha: bool = False) -> bytes:
    """A small deterministic image encoded as PNG."""
    image = photo(seed, size)
    if alpha:
        image = image.convert("RGBA")
        image.putalpha(128)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def jpeg_bytes(seed: int, size: tuple[int, int] = (320, 240)) -> bytes:
    """A deterministic JPEG."""
    out = io.BytesIO()
    photo(seed, size).save(out, format="JPEG", quality=90)
    return out.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    """A zip archive of ``members`` (name -> bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def tar_bytes(members: dict[str, bytes]) -> bytes:
    """An uncompressed tar of ``members``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


@dataclass(frozen=True)
class Seeded:
    """Ids of a seeded finished audit."""

    audit: int
    job: int
    matches: dict[str, int]
    items: dict[str, int]
    split_items: dict[str, int]


def sha256(data: bytes) -> str:
    """Hex SHA-256."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


def seed_audit(home: Path, files: Path, *, status: str = "done") -> Seeded:
    """A finished audit whose corpus items live as a file, a tar member and a zip member on disk."""
    files.mkdir(parents=True, exist_ok=True)
    plain, tarred, zipped, alpha, test_img = (
        png_bytes(1),
        jpeg_bytes(2),
        png_bytes(3),
        png_bytes(4, alpha=True),
        png_bytes(5),
    )
    (files / "plain.png").write_bytes(plain)
    (files / "alpha.png").write_bytes(alpha)
    (files / "shard.tar").write_bytes(tar_bytes({"k2.jpg": tarred}))
    (files / "bundle.zip").write_bytes(zip_bytes({"dir/k3.png": zipped}))
    (files / "test.png").write_bytes(test_img)
    with tarfile.open(files / "shard.tar") as tf:
        member = tf.getmember("k2.jpg")
        tar_loc = {
            "kind": "tar",
            "path": str(files / "shard.tar"),
            "offset": member.offset_data,
            "size": member.size,
        }
    ws = workspace(home)
    try:
        with transaction(ws.sessions) as s:
            corpus = Corpus(
                name="laion", generation=1, model_id="tiny", model_spec="/m", embed_dim=16
            )
            s.add(corpus)
            s.flush()
            shard = Shard(corpus_id=corpus.id, source=str(files), name="00000", status="done")
            s.add(shard)
            s.flush()
            rows = {
                "file": Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="k1.png",
                    uri=str(files / "plain.png"),
                    locator={"kind": "file", "path": str(files / "plain.png")},
                    sha256=sha256(plain),
                    caption="a cat on a mat",
                    label="cat",
                ),
                "tar": Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="k2",
                    uri="tar",
                    locator=tar_loc,
                    sha256=sha256(tarred),
                ),
                "zip": Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="k3",
                    uri="zip",
                    locator={
                        "kind": "zip",
                        "path": str(files / "bundle.zip"),
                        "member": "dir/k3.png",
                    },
                    sha256=sha256(zipped),
                ),
                "alpha": Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="k4.png",
                    uri="alpha",
                    locator={"kind": "file", "path": str(files / "alpha.png")},
                    sha256=sha256(alpha),
                ),
                "gone": Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="k5.png",
                    uri="gone",
                    locator={"kind": "file", "path": str(files / "missing.png")},
                    sha256="ab" * 32,
                    pixel_digest="cd" * 32,
                ),
                "url": Item(
                    corpus_id=corpus.id,
                    shard_id=shard.id,
                    key="k6",
                    uri="http://example.com/6.jpg",
                    locator={"kind": "url", "url": "http://example.com/6.jpg"},
                    sha256="ef" * 32,
                ),
            }
            split = Split(name="test", item_count=2)
            s.add_all([*rows.values(), split])
            s.flush()
            tests = {
                "cat": SplitItem(
                    split_id=split.id,
                    key="cat/1.png",
                    label="cat",
                    sha256=sha256(test_img),
                    locator={"kind": "file", "path": str(files / "test.png")},
                ),
                "dog": SplitItem(
                    split_id=split.id,
                    key="dog/1.png",
                    label="dog",
                    locator={"kind": "file", "path": str(files / "nope.png")},
                ),
            }
            job = Job(kind="audit", status=status, progress=1.0 if status == "done" else 0.0)
            s.add_all([*tests.values(), job])
            s.flush()
            audit = Audit(
                split_id=split.id,
                job_id=job.id,
                corpora=["laion"],
                summary={"items": 2, "flagged": 2},
            )
            s.add(audit)
            s.flush()
            matches = {
                "exact": Match(
                    audit_id=audit.id,
                    split_item_id=tests["cat"].id,
                    item_id=rows["file"].id,
                    corpus="laion",
                    kind="exact",
                    hamming=0,
                    score=1.0,
                ),
                "near": Match(
                    audit_id=audit.id,
                    split_item_id=tests["dog"].id,
                    item_id=rows["tar"].id,
                    corpus="laion",
                    kind="near",
                    hamming=5,
                    cosine=0.95,
                    score=0.95,
                ),
                "semantic": Match(
                    audit_id=audit.id,
                    split_item_id=tests["dog"].id,
                    item_id=rows["zip"].id,
                    corpus="laion",
                    kind="semantic",
                    cosine=0.88,
                    score=0.88,
                ),
            }
            s.add_all(matches.values())
            s.flush()
            return Seeded(
                audit=audit.id,
                job=job.id,
                matches={k: m.id for k, m in matches.items()},
                items={k: i.id for k, i in rows.items()},
                split_items={k: t.id for k, t in tests.items()},
            )
    finally:
        ws.close()


def assert_error(response: Any, status: int, code: str, *, contains: str = "") -> dict[str, Any]:
    """The response is the one error shape with ``status`` and ``code``; returns the error member."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert {"code", "message"} <= set(error)
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert contains in error["message"], error["message"]
    return dict(error)
