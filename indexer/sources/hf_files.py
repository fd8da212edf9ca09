"""What the Parquet and Arrow sources of a Hugging Face dataset share: one shard per data file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources._layout import digest
from splitaudit.indexer.sources.hf_features import HFLayout
from splitaudit.indexer.sources.record import Shard


class HFFileShards:
    """Shards of a source made of data files under ``root``, each named by its path there."""

    files: list[Path]
    root: Path
    image_column: str | None
    key_column: str | None = None
    uri: str
    _layouts: dict[str, HFLayout]

    def _name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def shards(self) -> Iterator[Shard]:
        """One shard per file; fingerprint = size + mtime + image column (+ key column)."""
        key = (f"key_column={self.key_column}",) if self.key_column else ()
        for f in self.files:
            st = f.stat()
            yield Shard(
                self.uri,
                self._name(f),
                digest(st.st_size, st.st_mtime_ns, self.image_column or "", *key),
            )

    def _shard_file(self, shard: Shard) -> tuple[Path, HFLayout]:
        """The file of ``shard`` and its column layout (``InputError`` for a file of another source)."""
        path = self.root / shard.name
        layout = self._layouts.get(str(path))
        if layout is None:
            raise InputError(f"{shard.name!r} is not a file of {self.uri}")
        return path, layout
