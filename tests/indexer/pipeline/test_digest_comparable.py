"""The exact tier's keys stay comparable between hash-only and embedding runs, and corpus vs split.

Hash-only runs decode JPEGs at the smallest scale the hashes need (``hashes_only``), so a
reduced JPEG gets no pixel digest there; its exact key is the stream digest, which does not
depend on decoding (see ``splitaudit.indexer.features.decode`` and ``splitaudit.indexer.features.jpeg_stream``).
These tests pin, on every path: stream digests equal; pixel digests equal wherever both runs
computed one (non-JPEG, and JPEGs too small to be reduced); and a metadata-only copy of a JPEG
is ``exact`` against a hash-only corpus.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from conftest import photo
from PIL import Image
from sqlalchemy import select

from splitaudit.indexer.audit.ingest import ingest_split
from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
from splitaudit.indexer.db.models import Item, SplitItem
from splitaudit.indexer.embed.loader import load_embedder
from splitaudit.indexer.features.hashes import Hash64
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.reporting.report import audit_report
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.open import open_split
from splitaudit.indexer.workspace import Workspace

Stored = dict[str, tuple[str | None, str | None, int | None]]
SIZES = [(1600, 1200), (700, 520), (300, 200), (2400, 1800), (60, 40)]


def _folder(root: Path) -> Path:
    root.mkdir()
    for seed, size in enumerate(SIZES):
        photo(seed, size).save(root / f"{seed}.jpg", quality=88)
    photo(9, (640, 480)).save(root / "9.png")
    return root


def _stored(ws: Workspace) -> Stored:
    with ws.sessions() as s:
        return {i.key: (i.pixel_digest, i.stream_digest, i.phash) for i in s.scalars(select(Item))}


def _hamming(a: int | None, b: int | None) -> int:
    assert a is not None and b is not None
    return Hash64.from_signed(a) - Hash64.from_signed(b)


def _index_both(tmp_path: Path, root: Path, spec: str) -> tuple[Stored, Stored]:
    plain = Workspace.open(tmp_path / "plain")
    index_sources(plain, "c", [FolderSource(root)], embedder=None, workers=2)
    embedded = Workspace.open(tmp_path / "embedded")
    index_sources(
        embedded, "c", [FolderSource(root)], embedder=load_embedder(spec), model_spec=spec
    )
    return _stored(plain), _stored(embedded)


def test_exact_keys_are_the_same_with_and_without_embeddings(
    tmp_path: Path, tiny_model_spec: str
) -> None:
    plain, embedded = _index_both(tmp_path, _folder(tmp_path / "corpus"), tiny_model_spec)
    assert set(plain) == set(embedded) and len(plain) == 6
    for key in plain:
        (p_pixel, p_stream, p_hash), (e_pixel, e_stream, e_hash) = plain[key], embedded[key]
        assert p_stream == e_stream, key
        assert p_pixel in (None, e_pixel), key  # where both runs digest pixels, they agree
        assert e_pixel is not None, key  # embedding runs always digest the 256-request decode
        assert _hamming(p_hash, e_hash) <= 4, key  # decode scale moves pHash by a few bits
    # JPEGs: a stream digest everywhere; the PNG: none.
    assert all(plain[f"{n}.jpg"][1] for n in range(len(SIZES))) and plain["9.png"][1] is None
    # Reduced JPEGs have no pixel digest in the hash-only run ...
    assert [plain[f"{n}.jpg"][0] for n in range(4)] == [None] * 4
    # ... while a JPEG too small to reduce, and every non-JPEG, keeps the same one.
    assert plain["4.jpg"][0] == embedded["4.jpg"][0] is not None
    assert plain["9.png"][0] == embedded["9.png"][0] is not None
    assert plain["9.png"][2] == embedded["9.png"][2]  # same pixels, same pHash


def test_an_embedding_run_digests_the_fixed_256_draft_decode(
    tmp_path: Path, tiny_model_spec: str
) -> None:
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
    spec = tiny_model_spec
    index_sources(ws, "c", [FolderSource(root)], embedder=load_embedder(spec), model_spec=spec)
    assert _stored(ws)["a.jpg"][0] == expected


def test_a_split_gets_the_keys_its_corpus_got(tmp_path: Path, tiny_model_spec: str) -> None:
    root = _folder(tmp_path / "corpus")
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(root)], embedder=None)  # hash-only corpus
    split_id = create_split(ws, FolderSource(root), name="s")
    ingest_split(
        ws, split_id, FolderSource(root), embedders={"m": load_embedder(tiny_model_spec)}, workers=2
    )
    with ws.sessions() as s:
        split = {i.key: (i.pixel_digest, i.stream_digest) for i in s.scalars(select(SplitItem))}
    corpus = _stored(ws)
    assert {k: v[1] for k, v in split.items()} == {k: v[1] for k, v in corpus.items()}
    for key, (pixel, _) in split.items():  # the split always has the 256-request digest
        assert pixel is not None
        if corpus[key][0] is not None:
            assert corpus[key][0] == pixel, key


def test_a_metadata_only_copy_is_exact_against_a_hash_only_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    original = photo(3, (1200, 900))
    original.save(corpus / "orig.jpg", quality=90)
    photo(7, (1200, 900)).save(corpus / "other.jpg", quality=90)
    split = tmp_path / "split"
    split.mkdir()
    exif = Image.Exif()
    exif[0x010E] = "a caption someone added"  # ImageDescription
    original.save(split / "tagged.jpg", quality=90, exif=exif, comment=b"edited")
    rotated = Image.Exif()
    rotated[0x0112] = 6  # same coded data, displayed rotated: not the same image
    original.save(split / "turned.jpg", quality=90, exif=rotated)
    ws = Workspace.open(tmp_path / "home")
    index_sources(ws, "c", [FolderSource(corpus)], embedder=None)
    split_id = create_split(ws, open_split(str(split)), name="s")
    audit_id = create_audit(ws, split_id=split_id, corpora=["c"])
    run_audit(ws, audit_id)
    with ws.sessions() as s:
        report = audit_report(s, audit_id)
    by_key = {it["key"]: it for it in report["items"]}
    tagged = by_key["tagged.jpg"]
    assert tagged["verdict"] == "exact"
    evidence = tagged["matches"][0]["evidence"]
    assert evidence["stream_digest_equal"] is True and "sha256_equal" not in evidence
    assert by_key["turned.jpg"]["verdict"] != "exact"
