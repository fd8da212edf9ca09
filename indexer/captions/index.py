"""The persistent caption index of a corpus: MinHash signatures and LSH bands in segments on disk.

Layout, in ``<home>/corpora/<corpus>/captions/`` (next to the corpus's FAISS stores)::

    captions.json            sidecar: format, LSH parameters, boilerplate version, count,
                             max_item_id (the watermark), segments, the frequency file
    seg-000001.ids.npy       corpus item ids of the segment's captions (int64)
    seg-000001.sig.npy       MinHash signatures, low 16 bits of each slot ((n, num_perm) uint16)
    seg-000001.bkeys.npy     per band, the band keys sorted ((bands, n) uint32)
    seg-000001.brows.npy     per band, the segment row of each sorted key ((bands, n) int32)
    seg-000001.exact.npy     normalised-caption hashes sorted (uint64) ...
    seg-000001.erows.npy     ... and their segment rows (int32)
    seg-000001.lengths.npy   content-token count per row (uint16)
    df-<generation>.npy      shingle-frequency sketch (see ``boilerplate.ShingleFrequency``)

Every file is written to a temp name, fsynced and renamed; the sidecar is written last and is
the commit: a killed run leaves files the sidecar does not name (removed on the next open) and
the next run starts again from the sidecar's ``max_item_id``. Segments are memory-mapped when
queried, so an index larger than RAM still answers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.captions.boilerplate import ShingleFrequency
from splitaudit.indexer.captions.minhash import LshParams, band_keys, signatures
from splitaudit.indexer.captions.normalize import BOILERPLATE_VERSION, SHINGLE_WORDS, token_batch
from splitaudit.indexer.errors import IndexMismatchError

__all__ = ["CaptionIndex", "CaptionIndexWriter", "Segment", "TextFetcher"]

FORMAT_VERSION = 1
SIDECAR = "captions.json"
# A segment is flushed (and the watermark committed) every this many indexed captions.
SEGMENT_ROWS = 262_144
# More small segments than this are merged into one when the next sync commits.
MAX_SMALL_SEGMENTS = 8
_ARRAYS = ("ids", "sig", "bkeys", "brows", "exact", "erows", "lengths")

TextFetcher = Callable[[Sequence[int]], Mapping[int, str]]


@dataclass(frozen=True, slots=True)
class Segment:
    """One immutable, memory-mapped slice of the index."""

    name: str
    ids: npt.NDArray[np.int64]
    sig: npt.NDArray[np.uint16]
    bkeys: npt.NDArray[np.uint32]
    brows: npt.NDArray[np.int32]
    exact: npt.NDArray[np.uint64]
    erows: npt.NDArray[np.int32]
    lengths: npt.NDArray[np.uint16]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class IndexState:
    """What the sidecar records (the committed state of the index)."""

    corpus: str
    params: LshParams = field(default_factory=LshParams)
    count: int = 0  # captions in the segments
    captions: int = 0  # non-empty corpus captions read (frequency denominators)
    max_item_id: int = 0  # every item id <= this has been read
    segments: list[dict[str, Any]] = field(default_factory=list)
    generation: int = 0
    df_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The sidecar's content."""
        return {
            "format_version": FORMAT_VERSION,
            "corpus": self.corpus,
            "params": self.params.to_dict(),
            "shingle_words": SHINGLE_WORDS,
            "boilerplate_version": BOILERPLATE_VERSION,
            "count": self.count,
            "captions": self.captions,
            "max_item_id": self.max_item_id,
            "segments": self.segments,
            "generation": self.generation,
            "df_file": self.df_file,
        }

    @classmethod
    def read(cls, folder: Path, corpus: str) -> IndexState:
        """The committed state in ``folder`` (a fresh one when there is no sidecar yet)."""
        path = folder / SIDECAR
        if not path.exists():
            return cls(corpus=corpus)
        rebuild = (
            f"delete {folder} and run the caption sync again (`splitaudit index`) to rebuild it"
        )
        try:
            raw = json.loads(path.read_text("utf-8"))
            want = {
                "format_version": FORMAT_VERSION,
                "shingle_words": SHINGLE_WORDS,
                "boilerplate_version": BOILERPLATE_VERSION,
            }
            for key, value in want.items():
                if raw.get(key) != value:
                    raise IndexMismatchError(
                        f"caption index {path}: {key} is {raw.get(key)!r} but this splitaudit "
                        f"uses {value!r}; {rebuild}"
                    )
            if raw.get("corpus") != corpus:
                raise IndexMismatchError(
                    f"caption index {path} belongs to corpus {raw.get('corpus')!r}, not {corpus!r}; {rebuild}"
                )
            return cls(
                corpus=corpus,
                params=LshParams(**raw["params"]),
                count=int(raw["count"]),
                captions=int(raw["captions"]),
                max_item_id=int(raw["max_item_id"]),
                segments=list(raw["segments"]),
                generation=int(raw["generation"]),
                df_file=raw.get("df_file"),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexMismatchError(
                f"caption index sidecar {path} is unreadable ({exc}); {rebuild}"
            ) from exc


@dataclass
class CaptionIndex:
    """A loaded caption index: segments (memory-mapped), shingle frequencies, and a text fetcher.

    ``texts(item_ids)`` returns the corpus captions of those items (the DB in an audit; a list in
    the bench); matches are verified on the text, the index only nominates candidates.
    """

    folder: Path
    state: IndexState
    segments: list[Segment]
    frequency: ShingleFrequency
    texts: TextFetcher

    @property
    def params(self) -> LshParams:
        """MinHash / LSH parameters the index was built with."""
        return self.state.params

    def __len__(self) -> int:
        return self.state.count

    def info(self) -> dict[str, Any]:
        """What the report records about this index."""
        return {
            "captions": self.state.count,
            "corpus_captions": self.state.captions,
            "max_item_id": self.state.max_item_id,
            "segments": len(self.segments),
            "lsh": self.params.to_dict(),
            "shingle_words": SHINGLE_WORDS,
            "boilerplate_version": BOILERPLATE_VERSION,
        }

    @classmethod
    def load(cls, folder: Path, corpus: str, texts: TextFetcher) -> CaptionIndex:
        """Open the committed index in ``folder`` (empty if none was written yet)."""
        for attempt in (1, 2):
            state = IndexState.read(folder, corpus)
            try:
                segments = [_load_segment(folder, s["name"]) for s in state.segments]
                frequency = (
                    ShingleFrequency.load(folder / state.df_file, state.captions)
                    if state.df_file
                    else ShingleFrequency()
                )
                return cls(folder, state, segments, frequency, texts)
            except FileNotFoundError:
                if attempt == 1:  # a sync committed (and merged segments) while we read: again
                    continue
                raise _damaged(folder, "a file the sidecar names is missing") from None
            except (OSError, ValueError) as exc:
                raise _damaged(folder, str(exc)) from exc
        raise AssertionError("unreachable")


class CaptionIndexWriter:
    """Appends captions to an index folder; :meth:`commit` makes them (and the watermark) durable."""

    def __init__(
        self,
        folder: Path,
        corpus: str,
        *,
        segment_rows: int = SEGMENT_ROWS,
        params: LshParams | None = None,
    ) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.state = IndexState.read(folder, corpus)
        if params is not None and not self.state.segments:
            self.state = replace(self.state, params=params)  # a new index may choose its banding
        self.segment_rows = segment_rows
        if self.state.df_file:
            self.frequency = ShingleFrequency.load(folder / self.state.df_file, self.state.captions)
        else:
            self.frequency = ShingleFrequency()
        self._pending: list[dict[str, npt.NDArray[Any]]] = []
        self._pending_rows = 0
        self._max_item_id = self.state.max_item_id
        self._remove_uncommitted()

    @property
    def max_item_id(self) -> int:
        """The highest item id added so far (committed or not)."""
        return self._max_item_id

    def add(self, ids: npt.NDArray[np.int64], texts: Sequence[str | None]) -> None:
        """Index a batch of corpus captions (``ids`` ascending, above the watermark)."""
        if len(ids) != len(texts):
            raise ValueError("ids and texts differ in length")
        if not len(ids):
            return
        params = self.state.params
        batch = token_batch(texts)
        keys, owner = batch.shingles()
        self.frequency.add(keys, owner, int(np.count_nonzero(batch.lengths)))
        sig = signatures(keys, owner, len(batch), params)
        keep = batch.lengths >= SHINGLE_WORDS  # at least one shingle
        sig = sig[keep]
        self._pending.append(
            {
                "ids": np.asarray(ids, np.int64)[keep],
                "sig": (sig & np.uint32(0xFFFF)).astype(np.uint16),
                "bkeys": band_keys(sig, params),
                "exact": batch.exact[keep],
                "lengths": np.minimum(batch.lengths[keep], 65535).astype(np.uint16),
            }
        )
        self._pending_rows += int(np.count_nonzero(keep))
        self._max_item_id = max(self._max_item_id, int(ids[-1]))
        if self._pending_rows >= self.segment_rows:
            self.commit()

    def commit(self) -> None:
        """Write the pending segment, the frequencies and the sidecar (in that order).

        Nothing is written when nothing changed since the last commit (an audit's sync of an
        up-to-date index costs one sidecar read).
        """
        state = self.state
        unchanged = (
            not self._pending_rows
            and self._max_item_id == state.max_item_id
            and self.frequency.captions == state.captions
            and (self.folder / SIDECAR).exists()
        )
        if unchanged:
            self._pending = []
            return
        new_segments = list(state.segments)
        if self._pending_rows:
            parts = {k: np.concatenate([p[k] for p in self._pending]) for k in self._pending[0]}
            name = f"seg-{state.generation + 1:06d}"
            _write_segment(self.folder, name, parts)
            new_segments.append({"name": name, "count": self._pending_rows})
        new_segments = self._merge_small(new_segments, state.generation + 1)
        df_file = f"df-{state.generation + 1:06d}.npy"
        _atomic_save(self.folder / df_file, self.frequency.save)
        committed = replace(
            state,
            count=state.count + self._pending_rows,
            captions=self.frequency.captions,
            max_item_id=self._max_item_id,
            segments=new_segments,
            generation=state.generation + 1,
            df_file=df_file,
        )
        text = json.dumps(committed.to_json(), indent=2, sort_keys=True).encode()
        _atomic_save(self.folder / SIDECAR, lambda fh: fh.write(text))
        self.state = committed
        self._pending, self._pending_rows = [], 0
        self._remove_uncommitted()

    def _merge_small(self, segments: list[dict[str, Any]], generation: int) -> list[dict[str, Any]]:
        """Merge the small segments into one once there are too many (keeps queries cheap)."""
        small = [s for s in segments if s["count"] < self.segment_rows]
        if len(small) <= MAX_SMALL_SEGMENTS:
            return segments
        loaded = [_load_segment(self.folder, s["name"]) for s in small]
        parts = {
            "ids": np.concatenate([s.ids for s in loaded]),
            "sig": np.concatenate([s.sig for s in loaded]),
            "bkeys": np.concatenate([_unsorted_bands(s) for s in loaded], axis=0),
            "exact": np.concatenate([_unsorted_exact(s) for s in loaded]),
            "lengths": np.concatenate([s.lengths for s in loaded]),
        }
        name = f"seg-{generation:06d}m"
        _write_segment(self.folder, name, parts)
        kept = [s for s in segments if s["count"] >= self.segment_rows]
        return [*kept, {"name": name, "count": len(parts["ids"])}]

    def _remove_uncommitted(self) -> None:
        """Delete segment / frequency files the sidecar does not name (left by a killed run)."""
        named = {s["name"] for s in self.state.segments}
        for path in self.folder.iterdir():
            stem = path.name.split(".", 1)[0]
            if (
                (path.name.startswith(".") and path.name.endswith(".tmp"))
                or (path.name.startswith("seg-") and stem not in named)
                or (path.name.startswith("df-") and path.name != self.state.df_file)
            ):
                path.unlink(missing_ok=True)


def _damaged(folder: Path, why: str) -> IndexMismatchError:
    return IndexMismatchError(
        f"caption index {folder} is damaged ({why}); delete the folder and run the "
        "caption sync again (`splitaudit index`) to rebuild it"
    )


def _write_segment(folder: Path, name: str, parts: Mapping[str, npt.NDArray[Any]]) -> None:
    """Sort the band keys and exact hashes, then write every array of a segment atomically."""
    bkeys_rows = parts["bkeys"]  # (n, bands), row order
    order = np.argsort(bkeys_rows, axis=0, kind="stable").T.astype(np.int32)  # (bands, n)
    sorted_keys = np.take_along_axis(bkeys_rows.T, order, axis=1)
    eorder = np.argsort(parts["exact"], kind="stable").astype(np.int32)
    arrays = {
        "ids": parts["ids"],
        "sig": parts["sig"],
        "bkeys": np.ascontiguousarray(sorted_keys),
        "brows": np.ascontiguousarray(order),
        "exact": parts["exact"][eorder],
        "erows": eorder,
        "lengths": parts["lengths"],
    }
    for key, array in arrays.items():
        _atomic_save(folder / f"{name}.{key}.npy", functools.partial(_save_array, array=array))


def _save_array(fh: BinaryIO, *, array: npt.NDArray[Any]) -> None:
    np.save(fh, array)


def _load_segment(folder: Path, name: str) -> Segment:
    arrays = {k: np.load(folder / f"{name}.{k}.npy", mmap_mode="r") for k in _ARRAYS}
    return Segment(name=name, **arrays)


def _unsorted_bands(seg: Segment) -> npt.NDArray[np.uint32]:
    """Band keys back in row order ``(n, bands)`` (for merging segments)."""
    out = np.empty((len(seg), seg.bkeys.shape[0]), np.uint32)
    for j in range(seg.bkeys.shape[0]):
        out[seg.brows[j], j] = seg.bkeys[j]
    return out


def _unsorted_exact(seg: Segment) -> npt.NDArray[np.uint64]:
    out = np.empty(len(seg), np.uint64)
    out[seg.erows] = seg.exact
    return out


def _atomic_save(dest: Path, write: Callable[[BinaryIO], Any]) -> None:
    """``write(file)`` into a temp file, fsync, rename over ``dest``, fsync the folder."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        with contextlib.suppress(OSError):
            dir_fd = os.open(dest.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    finally:
        tmp.unlink(missing_ok=True)
