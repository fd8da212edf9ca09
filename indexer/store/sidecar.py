"""Sidecars: JSON next to each FAISS index naming what it holds; loading refuses a mismatch."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import IndexMismatchError
from splitaudit.indexer.store.atomic import atomic_write_json

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Sidecar:
    """What a saved index holds: model, dim, metric, count and the DB state it reflects.

    ``generation`` is the corpus generation (bumped per committed indexing batch) the index
    was synced to; ``last_batch_id`` / ``max_item_id`` say which vector batches / item rows
    are already in the index, so a later load only adds what is newer.
    """

    kind: str  # "float" | "binary"
    model_id: str
    dim: int
    metric: str
    count: int
    generation: int
    last_batch_id: int = 0
    max_item_id: int = 0
    index_type: str = "Flat"
    params: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def save(self, path: Path) -> None:
        """Write atomically."""
        atomic_write_json(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> Sidecar:
        """Read a sidecar; a missing/garbled one raises ``IndexMismatchError``."""
        try:
            raw = json.loads(path.read_text())
            return cls(**raw)
        except FileNotFoundError as exc:
            raise IndexMismatchError(
                f"index sidecar {path} is missing: the index was not saved by splitaudit; "
                "delete the index folder and run `splitaudit index` again to rebuild it"
            ) from exc
        except (ValueError, TypeError) as exc:
            raise IndexMismatchError(f"index sidecar {path} is unreadable: {exc}") from exc

    def check(self, *, kind: str, model_id: str, dim: int, metric: str, path: Path) -> None:
        """Raise ``IndexMismatchError`` unless this sidecar matches what the caller expects."""
        if self.format_version != FORMAT_VERSION:
            raise IndexMismatchError(
                f"{path}: index format {self.format_version} is not supported "
                f"(this splitaudit writes {FORMAT_VERSION}); rebuild the index"
            )
        for name, have, want in (
            ("kind", self.kind, kind),
            ("model", self.model_id, model_id),
            ("dim", self.dim, dim),
            ("metric", self.metric, metric),
        ):
            if have != want:
                raise IndexMismatchError(
                    f"{path}: index {name} is {have!r} but the corpus expects {want!r}; "
                    "the index belongs to another corpus or model — rebuild it"
                )


# The corpus's match-threshold record (``splitaudit.indexer.match.calibrate_thresholds``) lives next to
# its index sidecars: which cosines its model gets, where they came from, the figures behind.
THRESHOLDS_FILE = "thresholds.json"


def save_thresholds_sidecar(corpus_dir: Path, record: dict[str, Any]) -> None:
    """Write the corpus's threshold record atomically."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(corpus_dir / THRESHOLDS_FILE, {"format_version": FORMAT_VERSION, **record})


def load_thresholds_sidecar(corpus_dir: Path) -> dict[str, Any] | None:
    """The corpus's threshold record, or None when missing or unreadable (it is then re-derived)."""
    path = corpus_dir / THRESHOLDS_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("format_version") != FORMAT_VERSION:
        return None
    return {k: v for k, v in raw.items() if k != "format_version"}
