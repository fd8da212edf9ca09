"""Verification features of corpus images, kept between audits (``HOME/cache/verify.sqlite``).

The pixel verifier needs each candidate corpus image's 32x32 thumbnail and the geometric
step its SIFT keypoints; both come from decoding the image, which with the detection is most
of an audit's time (docs/thresholds.md, "Audit cost"). Both depend only on the image's bytes
and the verification settings, so this store keeps them keyed by the corpus item's SHA-256
and a version string of those settings (``settings_version``: working size, feature count and
contrast of the detector, thumbnail size and filter, the decode request, the OpenCV and
Pillow versions). A later audit that meets the same corpus images (the same split again, or
another split with overlapping candidates) skips their decode and detection and gets the
same features, so the same results.

It is a cache and nothing else: bounded by ``SPLITAUDIT_VERIFY_CACHE_MB`` (default 1024;
``0`` turns it off), least recently used entries dropped first; rows of other settings
versions are dropped when it opens; an entry that cannot be read is a miss; a store that
cannot be opened or written (read-only home, locked, damaged file) is logged once and the
audit runs without it. Keypoints are kept only where the descriptors are small integers
(what SIFT gives: stored as bytes, read back exactly).
"""

from __future__ import annotations

import io
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.match.geometry import Keypoints

log = logging.getLogger(__name__)

STORE_FILE = "verify.sqlite"
DEFAULT_CAP_MB = 1024
_CHUNK = 500  # digests per SQL IN (...) list
_FLUSH_EVERY = 256  # entries held before they are written (~20 MiB of keypoints)
THUMB, KEYPOINTS, PIXELS = "thumb", "keypoints", "pixels"


def settings_version() -> str:
    """What the stored features depend on besides the image bytes."""
    import cv2
    import PIL

    from splitaudit.indexer.features.decode import DRAFT_SIZE
    from splitaudit.indexer.match import border_trim, content_check, geometry, verify

    return ";".join(
        [
            "v2",
            f"work={geometry.WORK_SIDE}",
            f"features={geometry.MAX_FEATURES}",
            f"spread={geometry.SPREAD_GRID}/{geometry.SPREAD_SHARE}",
            f"content={content_check.CONTENT_SIDE}",
            f"contrast={geometry.CONTRAST}",
            f"thumb={verify.THUMB_SIZE}/{int(verify._RESAMPLE)}",
            f"border={border_trim.TOLERANCE}/{border_trim.MAX_SHARE}",
            f"draft={DRAFT_SIZE[0]}x{DRAFT_SIZE[1]}",
            f"opencv={cv2.__version__}",
            f"pillow={PIL.__version__}",
        ]
    )


class VerifyStore:
    """Thumbnails and keypoints of corpus images by SHA-256 (see the module docstring)."""

    def __init__(self, path: Path, cap_bytes: int, version: str | None = None) -> None:
        self.path = Path(path)
        self.cap_bytes = cap_bytes
        self.version = version or settings_version()
        self.hits = 0
        self.misses = 0
        self._pending: list[tuple[str, str, bytes]] = []
        self._used: set[tuple[str, str]] = set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS features (digest TEXT NOT NULL, kind TEXT NOT NULL, "
            "version TEXT NOT NULL, used INTEGER NOT NULL, data BLOB NOT NULL, "
            "PRIMARY KEY (digest, kind))"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS ix_features_used ON features (used)")
        self._db.execute("DELETE FROM features WHERE version != ?", (self.version,))

    @classmethod
    def for_home(cls, home: Path) -> VerifyStore | None:
        """The home folder's store, or None when turned off or unusable (logged)."""
        cap_mb = _cap_mb()
        if cap_mb <= 0:
            return None
        path = Path(home) / "cache" / STORE_FILE
        try:
            return cls(path, cap_mb * 1024 * 1024)
        except (OSError, sqlite3.Error) as exc:
            log.warning("verification store %s unusable (%s); auditing without it", path, exc)
            return None

    def thumbnails(self, digests: Iterable[str]) -> dict[str, npt.NDArray[np.uint8]]:
        """Stored thumbnails of ``digests`` (missing ones absent)."""
        return {d: a for d, a in self._read(THUMB, digests).items() if a.dtype == np.uint8}

    def keypoints(self, digests: Iterable[str]) -> dict[str, Keypoints]:
        """Stored keypoints of ``digests`` (missing ones absent)."""
        out: dict[str, Keypoints] = {}
        for digest, packed in self._read(KEYPOINTS, digests).items():
            if packed.dtype != np.uint8 or packed.ndim != 2 or packed.shape[1] != 136:
                continue
            width, height = (int(v) for v in packed[0, :8].view(np.int32))
            rows = packed[1:]
            points = np.ascontiguousarray(rows[:, :8]).view(np.float32).reshape(-1, 2)
            descriptors = rows[:, 8:].astype(np.float32)
            out[digest] = Keypoints(points, descriptors, width, height)
        # the content check's pixels (``geometry.Keypoints.pixels``), kept beside them: part of
        # the keypoints' entry, not counted as a feature of their own
        counts = self.hits, self.misses
        kept = self._read(PIXELS, list(out))
        self.hits, self.misses = counts
        for digest, pixels in kept.items():
            if pixels.dtype == np.uint8 and pixels.ndim == 2:
                out[digest] = replace(out[digest], pixels=pixels)
        return out

    def put_thumbnail(self, digest: str | None, thumbnail: npt.NDArray[np.uint8]) -> None:
        """Keep ``thumbnail`` for ``digest`` (written by ``flush``)."""
        if digest:
            self._keep(digest, THUMB, _pack(np.asarray(thumbnail, np.uint8)))

    def put_keypoints(self, digest: str | None, found: Keypoints) -> None:
        """Keep ``found`` for ``digest`` when its descriptors are bytes (written by ``flush``)."""
        descriptors = found.descriptors
        exact = descriptors.size == 0 or (
            float(descriptors.min()) >= 0
            and float(descriptors.max()) <= 255
            and np.array_equal(descriptors, np.rint(descriptors))
        )
        if not digest or not exact:
            return
        # one uint8 row per keypoint: x, y as float32 bytes, then 128 descriptor bytes;
        # row 0 carries the working size as int32 bytes
        rows = np.zeros((len(found) + 1, 136), np.uint8)
        rows[0, :8] = np.array([found.width, found.height], np.int32).view(np.uint8)
        rows[1:, :8] = np.ascontiguousarray(found.points, np.float32).view(np.uint8).reshape(-1, 8)
        rows[1:, 8:] = descriptors.astype(np.uint8)
        self._keep(digest, KEYPOINTS, _pack(rows))
        if found.pixels is not None:
            self._keep(digest, PIXELS, _pack(np.asarray(found.pixels, np.uint8)))

    def _keep(self, digest: str, kind: str, data: bytes) -> None:
        self._pending.append((digest, kind, data))
        if len(self._pending) >= _FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write what was put, mark what was read as used, drop the oldest above the cap."""
        now = time.time_ns()
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "INSERT OR REPLACE INTO features (digest, kind, version, used, data) "
                "VALUES (?, ?, ?, ?, ?)",
                [(d, k, self.version, now, data) for d, k, data in self._pending],
            )
            self._db.executemany(
                "UPDATE features SET used = ? WHERE digest = ? AND kind = ?",
                [(now, d, k) for d, k in self._used],
            )
            self._evict()
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("verification store %s not updated (%s)", self.path, exc)
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        self._pending.clear()
        self._used.clear()

    def close(self) -> None:
        """Flush, close, and log how many features were reused."""
        self.flush()
        self._db.close()
        log.info(
            "verification store %s: %d features reused, %d not stored yet",
            self.path,
            self.hits,
            self.misses,
        )

    def _evict(self) -> None:
        (total,) = self._db.execute(
            "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM features"
        ).fetchone()
        if total <= self.cap_bytes:
            return
        target = int(self.cap_bytes * 0.9)
        doomed: list[tuple[str, str]] = []
        for digest, kind, size in self._db.execute(
            "SELECT digest, kind, LENGTH(data) FROM features ORDER BY used"
        ):
            if total <= target:
                break
            doomed.append((digest, kind))
            total -= size
        self._db.executemany("DELETE FROM features WHERE digest = ? AND kind = ?", doomed)

    def _read(self, kind: str, digests: Iterable[str]) -> dict[str, npt.NDArray[np.uint8]]:
        wanted = sorted({d for d in digests if d})
        out: dict[str, npt.NDArray[np.uint8]] = {}
        try:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for digest, data in self._db.execute(
                    f"SELECT digest, data FROM features WHERE kind = ? AND digest IN ({marks})",
                    (kind, *chunk),
                ):
                    array = _unpack(data)
                    if array is not None:
                        out[digest] = array
                        self._used.add((digest, kind))
        except sqlite3.Error as exc:
            log.warning("verification store %s unreadable (%s)", self.path, exc)
        self.hits += len(out)
        self.misses += len(wanted) - len(out)
        return out


@contextmanager
def open_verify_store(home: Path) -> Iterator[VerifyStore | None]:
    """The home folder's store for one audit or dedup run (``None`` when turned off or
    unusable), closed at the end, whatever happens."""
    store = VerifyStore.for_home(home)
    try:
        yield store
    finally:
        if store is not None:
            store.close()


def _pack(array: npt.NDArray[np.uint8]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _unpack(data: bytes) -> npt.NDArray[np.uint8] | None:
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        return None
    return array if isinstance(array, np.ndarray) else None


def _cap_mb() -> int:
    raw = os.environ.get("SPLITAUDIT_VERIFY_CACHE_MB", "").strip()
    if not raw:
        return DEFAULT_CAP_MB
    try:
        return int(raw)
    except ValueError:
        log.warning(
            "SPLITAUDIT_VERIFY_CACHE_MB=%r is not a whole number; using %d", raw, DEFAULT_CAP_MB
        )
        return DEFAULT_CAP_MB
