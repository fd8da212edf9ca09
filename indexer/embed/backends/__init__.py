"""Inference backends: run a loaded torch image tower through ONNX Runtime or OpenVINO on CPU.

``load_embedder_on_backend`` is the one entry point the CLI, the audit service and the job
worker use: it loads the eager torch ``Embedder`` (``load_embedder``), then, for an exported
backend, swaps its forward pass for the cached export (see ``exported.accelerate``); a later
run starts that export from its launch record without torch (``launch``). The model
id never changes with the backend: vectors from every backend agree with eager torch to cosine
>= 0.999, checked when the export is made.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from splitaudit.indexer.errors import UsageError

if TYPE_CHECKING:
    from splitaudit.indexer.embed.protocol import Embedder

__all__ = [
    "AUTO_PREFERENCE",
    "BACKEND_CHOICES",
    "EXPORTED_BACKENDS",
    "backend_embedder_factory",
    "export_cache_dir",
    "installed_backends",
    "load_embedder_on_backend",
    "resolve_backend",
]

logger = logging.getLogger(__name__)

EXPORTS_DIR = "exports"
EXPORTED_BACKENDS = ("onnxruntime", "openvino")
BACKEND_CHOICES = ("auto", "torch", *EXPORTED_BACKENDS)
# Fastest first, as measured by bench/embedding.py on a 2-core CPU (see docs/indexing.md).
AUTO_PREFERENCE = ("openvino", "onnxruntime", "torch")
# Python modules each backend needs: the export goes torch -> ONNX (needs `onnx`) first.
_MODULES = {
    "torch": ("torch",),
    "onnxruntime": ("onnx", "onnxruntime"),
    "openvino": ("onnx", "openvino"),
}
# OpenVINO (the fastest here) and onnx come with the [embed] extra; ONNX Runtime is its own extra.
_INSTALL = {
    "onnxruntime": "pip install 'splitaudit[onnxruntime]'",
    "openvino": "pip install 'splitaudit[embed]'",
}


def export_cache_dir(home: Path) -> Path:
    """Where a splitaudit home folder keeps its exported models."""
    return Path(home) / EXPORTS_DIR


def installed_backends() -> list[str]:
    """The backends whose libraries are importable here, in ``AUTO_PREFERENCE`` order."""
    return [
        name
        for name in AUTO_PREFERENCE
        if all(importlib.util.find_spec(module) is not None for module in _MODULES[name])
    ]


def resolve_backend(name: str, device: str = "cpu") -> str:
    """The concrete backend for ``--backend NAME`` on ``device``.

    ``auto`` is the fastest installed backend for a CPU device and torch on any other device.
    An explicit backend that is not installed is a ``UsageError`` naming the installed ones;
    an exported backend asked for on a non-CPU device runs as torch (the exports are CPU builds).
    """
    if name not in BACKEND_CHOICES:
        raise UsageError(f"unknown backend {name!r}: use one of {', '.join(BACKEND_CHOICES)}")
    installed = installed_backends()
    if name == "auto":
        # nothing installed (the light core): torch, whose loader names the [embed] extra
        return installed[0] if installed and _is_cpu(device) else "torch"
    if name not in installed:
        raise UsageError(
            f"backend {name!r} is not installed here (installed: {', '.join(installed)}); "
            f"install it with `{_INSTALL.get(name, 'pip install ' + name)}` or pass --backend auto"
        )
    if name != "torch" and not _is_cpu(device):
        logger.warning("backend %s runs on CPU only; using torch on device %s", name, device)
        return "torch"
    return name


def load_embedder_on_backend(
    spec: str,
    *,
    backend: str = "auto",
    cache_dir: Path,
    device: str = "cpu",
    batch_size: int = 32,
    allow_download: bool = True,
) -> Embedder:
    """Load the model named by ``spec`` and run it on ``backend`` (exports cached in ``cache_dir``).

    An export accepted before starts from its launch record without loading torch
    (``splitaudit.indexer.embed.backends.launch``); otherwise the model loads through torch and the export
    is made or reused, and its launch record written.
    """
    from splitaudit.indexer.embed.backends.exported import ExportedEmbedder, accelerate
    from splitaudit.indexer.embed.backends.launch import launch, remember
    from splitaudit.indexer.embed.embedder import OpenClipEmbedder
    from splitaudit.indexer.embed.loader import load_embedder

    chosen = resolve_backend(backend, device)
    if chosen != "torch":
        started = launch(spec, chosen, cache_dir=cache_dir, batch_size=batch_size)
        if started is not None:
            return started
    embedder = load_embedder(
        spec, device=device, batch_size=batch_size, allow_download=allow_download
    )
    if chosen == "torch" or not isinstance(embedder, OpenClipEmbedder):
        return embedder
    accelerated = accelerate(embedder, chosen, cache_dir=cache_dir)
    if isinstance(accelerated, ExportedEmbedder):
        remember(spec, accelerated, embedder.preprocess.transform, cache_dir)
    return accelerated


def backend_embedder_factory(
    backend: str, cache_dir: Path, *, device: str = "cpu"
) -> Callable[[str], Embedder]:
    """A ``spec -> Embedder`` loader on ``backend`` (checked now: an unusable backend raises here)."""
    resolve_backend(backend, device)

    def load(spec: str) -> Embedder:
        return load_embedder_on_backend(spec, backend=backend, cache_dir=cache_dir, device=device)

    return load


def _is_cpu(device: str) -> bool:
    return device == "cpu" or device.startswith("cpu:")
