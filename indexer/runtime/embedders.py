"""The one embedder factory: ``spec -> Embedder`` on the run's device and inference backend.

The CLI (``audit``, ``index``), the job worker and the Python API all load models through it, so a
model runs the same way (device, embed batch, exported-backend cache under the home) whichever
shell started the run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from splitaudit.indexer.embed.device import ResolvedDevice, resolve_device
from splitaudit.indexer.embed.protocol import Embedder

EmbedderFactory = Callable[[str], Embedder]


def embedder_factory(
    home: Path | str,
    *,
    backend: str = "auto",
    device: str | Callable[[], ResolvedDevice] = "auto",
) -> EmbedderFactory:
    """A loader of ``spec`` on ``backend`` and ``device`` (a name, or a resolver called on first load:
    torch is imported only when a model is really loaded), with the export cache under ``home``."""
    resolve = (
        device if callable(device) else functools.cache(functools.partial(resolve_device, device))
    )

    def load(spec: str) -> Embedder:
        return load_embedder(spec, home=home, backend=backend, device=resolve())

    return load


def load_embedder(spec: str, *, home: Path | str, backend: str, device: ResolvedDevice) -> Embedder:
    """``spec`` on a resolved device, in forward passes of at most its embed batch (bounded memory)."""
    from splitaudit.indexer.embed.backends import export_cache_dir, load_embedder_on_backend

    return load_embedder_on_backend(
        spec,
        backend=backend,
        cache_dir=export_cache_dir(Path(home)),
        device=device.device,
        batch_size=device.embed_batch,
    )
