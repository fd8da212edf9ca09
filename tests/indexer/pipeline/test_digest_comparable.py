"""The pixel digest and hashes of a file do not depend on whether the run embeds, nor on corpus vs split.

The JPEG pixel digest is defined on the fixed ``draft("RGB", (256, 256))`` decode (see
``indexer.features.decode``); these tests pin that it is the same number on every path.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from conftest import photo
from PIL import Image
from sqlalchemy import select

from indexer.audit.ingest import ingest_split
from indexer.db.models import Item, SplitItem
from indexer.embed.loader import load_embedder
from indexer.pipeline.index import index_sources
from indexer.sources.folder import FolderSource
from indexer.workspace import Workspace


def _folder(root: Path) -> Path:
    root.mkdir()
    for seed, size in enumerate([(1600, 1200), (700, 520), (300, 200), (2400, 1800)]):
        photo(seed, size).save(root / f"{seed}.jpg", quality=88)
    photo(9, (640, 480)).save(root / "9.png")
    return root


def _stored(ws: Workspace) -> dict[str, tuple[str | None, int | None, int | None]]:
    with ws.sessions() as s:
        return {i.key: (i.pixel_digest, i.phash, i.dhash) for i in s.scalars(select(Item))}


def test_digest_and_hashes_are_the_same_with_and_without_embeddings(
    tmp_path: Path, tiny_model_spec: str
) -> None:
    root = _folder(tmp_path / "corpus")
    plain = Workspace.open(tmp_path / "plain")
    index_sources(plain, "c", [FolderSource(root)], embedder=None, workers=2)
    embedded = Workspace.open(tmp_path / "embedded")
    index_sources(
        embedded,
        "c",
        [FolderSource(root)],
        embedder=load_embedder(tiny_model_spec),
        model_spec=tiny_model_spec,
    )
    assert _stored(plain) == _stored(embedded)
    assert len(_stored(plain)) == 5


def test_a_jpeg_digest_is_the_fixed_256_draft_decode(tmp_path: Path) -> None:
    data = io.BytesIO()
    photo(4, (2048, 1536)).save(data, "JPEG", quality=90)
    with Image.open(io.BytesIO(data.getvalue())) as im:
        im.draft("RGB", (256, 256))
        im.load()
        expected = hashlib.sha256(
            f"RGB {im.width}x{im.height}\n".encode() + im.tobytes()
        ).hexdigest()
        assert im.size == (512, 384)  # 1/4 scale: the largest reduction keeping both sides >= 256
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.jpg").write_bytes(data.getvalue())
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(root)], embedder=None)
    assert _stored(ws)["a.jpg"][0] == expected


def test_a_split_gets_the_digests_its_corpus_got(tmp_path: Path, tiny_model_spec: str) -> None:
    root = _folder(tmp_path / "corpus")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(root)], embedder=None)  # hash-only corpus
    from indexer.audit.service import create_split

    split_id = create_split(ws, FolderSource(root), name="s")
    ingest_split(
        ws, split_id, FolderSource(root), embedders={"m": load_embedder(tiny_model_spec)}, workers=2
    )
    with ws.sessions() as s:
        split = {i.key: (i.pixel_digest, i.phash, i.dhash) for i in s.scalars(select(SplitItem))}
    assert split == _stored(ws)
