"""Precomputed embeddings in clip-retrieval's layout: ``img_emb/img_emb_{i}.npy`` + ``metadata/metadata_{i}.parquet``."""

from __future__ import annotations

import logging
import os
import re
import tarfile
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.extras import HF_MODULES, require_extra
from splitaudit.indexer.sources._layout import digest, json_safe, text_value
from splitaudit.indexer.sources.record import Locator, Record, Shard
from splitaudit.indexer.sources.webdataset import (
    IMAGE_EXTS,
    is_compressed_tar,
    iter_members,
    split_member_name,
)

logger = logging.getLogger(__name__)

_NPY_NAME = re.compile(r"^img_emb_(\d+)\.npy$")
_KEY_COLUMNS = ("key", "image_path", "url")
_FIELD_COLUMNS = frozenset({"key", "caption", "url", "license", "LICENSE", "label"})
_TAR_CACHE = 4  # tar indexes kept in memory at once


class _TarKeyIndex:
    """Finds the image member of a key among img2dataset tars named by the key's prefix.

    img2dataset keys are ``{shard id}{sample id}`` and its tars ``{shard id}.tar``, so a key's
    tar is the one whose name is a prefix of the key; a few tar indexes are cached.
    """

    def __init__(self, shards_dir: Path) -> None:
        tars = sorted(t for t in shards_dir.iterdir() if t.name.endswith(".tar") and t.is_file())
        if not tars:
            raise InputError(f"{shards_dir} holds no .tar shards")
        self._by_stem = {t.name[: -len(".tar")]: t for t in tars}
        self._lengths = sorted({len(s) for s in self._by_stem}, reverse=True)
        self._cache: OrderedDict[Path, dict[str, Locator]] = OrderedDict()

    def locate(self, key: str) -> Locator | None:
        """The tar locator of ``key``'s image, or ``None`` when no shard holds it."""
        for n in self._lengths:
            tar = self._by_stem.get(key[:n])
            if tar is not None:
                found = self._index(tar).get(key)
                if found is not None:
                    return found
        return None

    def _index(self, tar: Path) -> dict[str, Locator]:
        if tar in self._cache:
            self._cache.move_to_end(tar)
            return self._cache[tar]
        index: dict[str, Locator] = {}
        if not is_compressed_tar(tar):
            try:
                with tarfile.open(tar, "r:") as tf:
                    for member in iter_members(tf):
                        parsed = split_member_name(member.name) if member.isfile() else None
                        if parsed and parsed[1] in IMAGE_EXTS and parsed[0] not in index:
                            index[parsed[0]] = Locator.tar_member(str(tar), member)
            except (tarfile.TarError, EOFError, OSError) as exc:
                logger.warning("cannot index shard %s: %s", tar, exc)
        self._cache[tar] = index
        if len(self._cache) > _TAR_CACHE:
            self._cache.popitem(last=False)
        return index


class PrecomputedEmbeddingSource:
    """Rows of clip-retrieval metadata, aligned with their precomputed image embeddings.

    One shard per ``img_emb_{i}.npy`` (named ``img_emb_{i}``). Keys: the ``key`` column, else
    ``image_path``, else ``url``, else the row number; a repeated key gets ``#row{n}`` appended.
    Records carry no bytes (locator ``none``) unless ``shards_dir`` holds the img2dataset tars
    the embeddings were computed from, in which case matching keys get ``tar`` locators.
    """

    def __init__(
        self, root: str | os.PathLike[str], *, shards_dir: str | os.PathLike[str] | None = None
    ) -> None:
        require_extra("hf", HF_MODULES, "reading a clip-retrieval embeddings folder")
        p = Path(root).expanduser()
        if not p.is_dir():
            raise InputError(
                f"{root} does not exist" if not p.exists() else f"{root} is not a folder"
            )
        self.root = p.resolve()
        self.uri = str(self.root)
        emb_dir, meta_dir = self.root / "img_emb", self.root / "metadata"
        if not emb_dir.is_dir():
            raise InputError(f"{root} has no img_emb/ folder (clip-retrieval layout expected)")
        found: list[tuple[int, str, Path, Path]] = []
        for npy in emb_dir.iterdir():
            match = _NPY_NAME.match(npy.name)
            if match is None:
                continue
            parquet = meta_dir / f"metadata_{match.group(1)}.parquet"
            if not parquet.is_file():
                raise InputError(f"{npy} has no metadata file {parquet}; both are needed")
            found.append((int(match.group(1)), npy.stem, npy, parquet))
        if not found:
            raise InputError(f"{emb_dir} holds no img_emb_<n>.npy files")
        self._shards = {name: (npy, pq) for _, name, npy, pq in sorted(found)}
        self._tars: _TarKeyIndex | None = None
        if shards_dir is not None:
            sd = Path(shards_dir).expanduser()
            if not sd.is_dir():
                raise InputError(f"shards_dir {shards_dir} does not exist or is not a folder")
            self._tars = _TarKeyIndex(sd.resolve())

    def _files(self, shard: Shard) -> tuple[Path, Path]:
        files = self._shards.get(shard.name)
        if files is None:
            raise InputError(f"{shard.name!r} is not a shard of {self.uri}")
        return files

    def count_hint(self) -> int:
        """The metadata rows of every shard (the progress total), from the Parquet footers."""
        return sum(_parquet_rows(pq) for _npy, pq in self._shards.values())

    def shards(self) -> Iterator[Shard]:
        """One shard per npy file; fingerprint = sizes + mtimes of the npy and its parquet."""
        for name, (npy, pq) in self._shards.items():
            a, b = npy.stat(), pq.stat()
            yield Shard(self.uri, name, digest(a.st_size, a.st_mtime_ns, b.st_size, b.st_mtime_ns))

    def embeddings(self, shard: Shard) -> npt.NDArray[np.floating[Any]]:
        """The shard's embeddings, memory-mapped (float16 or float32), one row per record."""
        npy, pq = self._files(shard)
        try:
            emb = np.load(npy, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InputError(f"{npy} is not a readable .npy file ({exc})") from exc
        if emb.ndim != 2 or emb.dtype not in (np.float16, np.float32):
            raise InputError(
                f"{npy}: expected a 2-D float16/float32 array, got {emb.dtype} {emb.shape}"
            )
        rows = _parquet_rows(pq)
        if emb.shape[0] != rows:
            raise InputError(
                f"{npy} has {emb.shape[0]} embeddings but {pq.name} has {rows} rows; "
                "they must be aligned row for row"
            )
        return emb

    def dim(self) -> int:
        """Embedding dimension (from the first shard)."""
        first = next(iter(self._shards.values()))[0]
        return int(np.load(first, mmap_mode="r", allow_pickle=False).shape[1])

    def records(self, shard: Shard) -> Iterator[Record]:
        """Records of one shard, in embedding row order (checked against the embeddings first)."""
        import pyarrow.parquet as pq_mod  # lazy: pyarrow is heavy to import

        self.embeddings(shard)  # row-count check before streaming anything
        _, pq = self._files(shard)
        seen: set[str] = set()
        row = 0
        with pq_mod.ParquetFile(pq) as pf:
            for batch in pf.iter_batches(batch_size=4096):
                for item in batch.to_pylist():
                    yield self._record(shard, row, item, seen)
                    row += 1

    def _record(self, shard: Shard, row: int, item: dict[str, Any], seen: set[str]) -> Record:
        key = next((k for c in _KEY_COLUMNS if (k := text_value(item.get(c)))), None) or str(row)
        metadata = {k: json_safe(v) for k, v in item.items() if k not in _FIELD_COLUMNS}
        if key in seen:
            metadata["duplicate_key"] = key
            key = f"{key}#row{row}"
        seen.add(key)
        locator = self._tars.locate(key) if self._tars is not None else None
        return Record(
            key=key,
            source=self.uri,
            shard=shard.name,
            locator=locator or Locator(kind="none"),
            url=text_value(item.get("url")),
            caption=text_value(item.get("caption")),
            label=text_value(item.get("label")),
            license=text_value(item.get("license") or item.get("LICENSE")),
            metadata=metadata,
        )


def _parquet_rows(path: Path) -> int:
    """Row count of a parquet file, from its footer."""
    import pyarrow.parquet as pq_mod

    try:
        with pq_mod.ParquetFile(path) as pf:
            return int(pf.metadata.num_rows)
    except Exception as exc:  # pyarrow raises several ArrowInvalid / OSError variants
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc
