"""PrecomputedEmbeddingSource: clip-retrieval layout, aligned records and memory-mapped embeddings."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.clip_retrieval import PrecomputedEmbeddingSource


def write_part(root: Path, i: int, emb: np.ndarray, meta: dict[str, list[object]]) -> None:
    (root / "img_emb").mkdir(parents=True, exist_ok=True)
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    np.save(root / "img_emb" / f"img_emb_{i}.npy", emb)
    pq.write_table(pa.table(meta), root / "metadata" / f"metadata_{i}.parquet")


def embeddings(n: int, seed: int, dtype: type = np.float16) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 4)).astype(dtype)


def test_records_aligned_with_memory_mapped_embeddings(tmp_path: Path) -> None:
    emb0 = embeddings(3, 0)
    write_part(
        tmp_path,
        0,
        emb0,
        {
            "url": ["https://a/0.jpg", "https://a/1.jpg", "https://a/2.jpg"],
            "caption": ["zero", "one", None],
            "key": ["000000000", "000000001", "000000002"],
            "similarity": [0.3, 0.2, 0.1],
        },
    )
    write_part(tmp_path, 10, embeddings(2, 1, np.float32), {"image_path": ["x/a.jpg", "x/b.jpg"]})
    write_part(tmp_path, 2, embeddings(1, 2), {"url": ["https://b/0.jpg"]})
    src = PrecomputedEmbeddingSource(tmp_path)
    shards = list(src.shards())
    assert [s.name for s in shards] == ["img_emb_0", "img_emb_2", "img_emb_10"]
    records = list(src.records(shards[0]))
    assert [r.key for r in records] == ["000000000", "000000001", "000000002"]
    assert records[0].url == "https://a/0.jpg" and records[0].caption == "zero"
    assert records[2].caption is None and records[0].metadata == {"similarity": 0.3}
    assert all(r.locator.kind == "none" and r.error is None for r in records)
    emb = src.embeddings(shards[0])
    assert isinstance(emb, np.memmap) and emb.dtype == np.float16
    np.testing.assert_array_equal(emb, emb0)
    assert [r.key for r in src.records(shards[2])] == ["x/a.jpg", "x/b.jpg"]
    assert src.embeddings(shards[2]).dtype == np.float32
    assert [r.key for r in src.records(shards[1])] == ["https://b/0.jpg"]
    assert src.dim() == 4
    json.dumps([dict(r.metadata) for r in records])


def test_row_count_mismatch_raises(tmp_path: Path) -> None:
    write_part(tmp_path, 0, embeddings(3, 0), {"url": ["a", "b"]})
    src = PrecomputedEmbeddingSource(tmp_path)
    (shard,) = src.shards()
    with pytest.raises(InputError, match=r"3 embeddings but metadata_0\.parquet has 2 rows"):
        src.embeddings(shard)
    with pytest.raises(InputError, match="aligned"):
        list(src.records(shard))


def test_missing_metadata_and_bad_layout(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="img_emb"):
        PrecomputedEmbeddingSource(tmp_path)
    (tmp_path / "img_emb").mkdir()
    np.save(tmp_path / "img_emb" / "img_emb_0.npy", embeddings(1, 0))
    with pytest.raises(InputError, match="no metadata file"):
        PrecomputedEmbeddingSource(tmp_path)


def test_non_float_embeddings_refused(tmp_path: Path) -> None:
    write_part(tmp_path, 0, np.zeros((2, 4), dtype=np.int64), {"url": ["a", "b"]})
    src = PrecomputedEmbeddingSource(tmp_path)
    with pytest.raises(InputError, match="float16/float32"):
        src.embeddings(next(src.shards()))


def test_duplicate_keys_stay_aligned_and_unique(tmp_path: Path) -> None:
    write_part(tmp_path, 0, embeddings(3, 0), {"key": ["a", "a", None]})
    src = PrecomputedEmbeddingSource(tmp_path)
    records = list(src.records(next(src.shards())))
    assert [r.key for r in records] == ["a", "a#row1", "2"]
    assert records[1].metadata["duplicate_key"] == "a"


def test_fingerprint_changes_when_metadata_changes(tmp_path: Path) -> None:
    write_part(tmp_path, 0, embeddings(1, 0), {"url": ["a"]})
    before = list(PrecomputedEmbeddingSource(tmp_path).shards())
    assert before == list(PrecomputedEmbeddingSource(tmp_path).shards())
    pq.write_table(
        pa.table({"url": ["a"], "caption": ["new and longer"]}),
        tmp_path / "metadata" / "metadata_0.parquet",
    )
    assert list(PrecomputedEmbeddingSource(tmp_path).shards()) != before


def test_shards_dir_gives_tar_locators(tmp_path: Path) -> None:
    shards_dir = tmp_path / "wds"
    shards_dir.mkdir()
    payload = {"000010000": b"\xff\xd8jpeg-one", "000010001": b"\xff\xd8jpeg-two"}
    with tarfile.open(shards_dir / "00001.tar", "w") as tf:
        for key, data in payload.items():
            for name, blob in ((f"{key}.jpg", data), (f"{key}.json", b"{}")):
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tf.addfile(info, io.BytesIO(blob))
    write_part(
        tmp_path / "emb", 0, embeddings(3, 0), {"key": ["000010001", "000010000", "000099999"]}
    )
    src = PrecomputedEmbeddingSource(tmp_path / "emb", shards_dir=shards_dir)
    records = list(src.records(next(src.shards())))
    assert records[0].locator.kind == "tar" and records[0].read_bytes() == payload["000010001"]
    assert records[1].read_bytes() == payload["000010000"]
    assert records[2].locator.kind == "none"
