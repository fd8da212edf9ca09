"""``accelerate``: export a torch image tower once, check it against eager torch, run it on a backend.

The export goes torch -> ONNX (TorchScript tracer, opset 17, dynamic batch) with a blank
example batch (a token-pooled open_clip ViT with its last block on the class token only, see
``cls_tower``), then into the backend's own format, all in float32 (no quantisation). Before
an export is used it must agree with eager torch: cosine >= ``MIN_COSINE`` for every image
of a held-out batch (procedural photos, a different batch size from the example). An export
that disagrees is refused, the refusal is cached with its reason, and the run uses torch.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.embed.backends.cache import CacheEntry, ExportCache, cache_key
from splitaudit.indexer.embed.backends.runners import backend_module, runner_threads
from splitaudit.indexer.embed.embedder import OpenClipEmbedder

if TYPE_CHECKING:
    import torch

    from splitaudit.indexer.embed.backends.array_preprocess import ArrayPreprocess
    from splitaudit.indexer.embed.embedder import BatchPreprocess
    from splitaudit.indexer.embed.protocol import Embedder

logger = logging.getLogger(__name__)

MIN_COSINE = 0.999
HELD_OUT_SIZES = (
    (320, 240),
    (240, 320),
    (256, 256),
    (500, 375),
    (96, 96),
    (640, 427),
    (300, 200),
    (224, 224),
)
WHOLE_RECIPE = "whole"  # the encoder traced as it is
_EXAMPLE_BATCH = 2
_OPSET = 17

# The decode workers each open an export of at most this many bytes (its model files) and run
# its forward pass on one thread beside their decode (``ExportedEmbedder.in_workers``); a larger
# model stays in the main process, so memory does not grow with a copy per worker.
WORKER_FORWARD_MAX_BYTES = 64 * 2**20
WORKER_THREADS = 1

Runner = Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]


class ExportedEmbedder:
    """An ``Embedder`` running an exported image tower; same preprocess and model id as eager torch."""

    def __init__(
        self,
        runner: Runner,
        preprocess: BatchPreprocess | ArrayPreprocess,
        *,
        model_id: str,
        dim: int,
        batch_size: int,
        backend: str,
        agreement: float,
        export_key: str = "",
        export_dir: Path | None = None,
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self.batch_size = batch_size
        self.backend = backend
        self.agreement = agreement  # lowest cosine vs eager torch over the held-out batch
        self.device = "cpu"
        self.export_key = export_key  # the cache entry it runs
        self.export_dir = export_dir  # that entry's folder, where known
        self.preprocess = preprocess
        self._runner = runner

    def __repr__(self) -> str:
        return f"ExportedEmbedder(model_id={self.model_id!r}, dim={self.dim}, backend={self.backend!r})"

    def embed(self, images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
        """Embed RGB images -> float32 ``(len(images), dim)``, each row L2-normalised."""
        out = np.empty((len(images), self.dim), dtype=np.float32)
        for start in range(0, len(images), self.batch_size):
            chunk = images[start : start + self.batch_size]
            batch = self.preprocess(chunk)  # a torch tensor, or numpy from ArrayPreprocess
            out[start : start + len(chunk)] = self.embed_array(np.asarray(batch))
        return out

    def embed_array(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Run a preprocessed ``(n, 3, H, W)`` batch through the export; rows L2-normalised."""
        features = self._runner(batch)
        if features.ndim != 2 or features.shape[1] != self.dim:
            raise RuntimeError(
                f"{self.model_id} on {self.backend}: export returned shape {features.shape}, "
                f"expected (n, {self.dim})"
            )
        return _normalise(features)

    def in_workers(self) -> WorkerEmbedder | None:
        """This embedder for the decode workers (``WorkerEmbedder``), or None where its export
        is unknown or larger than ``WORKER_FORWARD_MAX_BYTES`` (then the main process embeds)."""
        if self.export_dir is None:
            return None
        try:
            size = sum(p.stat().st_size for p in self.export_dir.iterdir() if p.is_file())
        except OSError:
            return None
        if size > WORKER_FORWARD_MAX_BYTES:
            return None
        from splitaudit.indexer.embed.backends.array_preprocess import ArrayPreprocess, describe

        preprocess = self.preprocess
        if not isinstance(preprocess, ArrayPreprocess):
            # a torch-loaded run's transform: replayed without torch (the same numbers), as a
            # forked worker must not run torch ops (its OpenMP pool does not survive a fork)
            description = describe(preprocess.transform)
            if description is None:
                return None
            preprocess = ArrayPreprocess(description)
        return WorkerEmbedder(
            backend=self.backend,
            folder=self.export_dir,
            preprocess=preprocess,
            model_id=self.model_id,
            dim=self.dim,
            batch_size=self.batch_size,
        )


# Runners opened by WorkerEmbedder in this process: (backend, folder) -> runner.
_WORKER_RUNNERS: dict[tuple[str, str], Runner] = {}


class WorkerEmbedder:
    """An exported embedder each process opens for itself, on ``WORKER_THREADS`` thread.

    Small to pickle (the backend, the export's folder and the preprocess: no runner), so a
    pool's tasks carry it; the first ``embed`` in a process opens the export there and keeps
    it. An indexing run's decode workers then run the forward pass beside their decode, one
    inference thread per worker, instead of handing their crops to the main process's streams:
    every core runs both, nothing waits on another process, and the crops never cross
    processes (each returns a row of ``dim`` floats). Same runner, same preprocess, same
    request size: the vectors are those of ``ExportedEmbedder.embed`` (tested).
    """

    def __init__(
        self,
        *,
        backend: str,
        folder: Path,
        preprocess: ArrayPreprocess,
        model_id: str,
        dim: int,
        batch_size: int,
    ) -> None:
        self.backend = backend
        self.folder = Path(folder)
        self.preprocess = preprocess
        self.model_id = model_id
        self.dim = dim
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"WorkerEmbedder(model_id={self.model_id!r}, backend={self.backend!r})"

    def embed(self, images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
        """Embed RGB images -> float32 ``(len(images), dim)``, rows L2-normalised."""
        key = (self.backend, str(self.folder))
        runner = _WORKER_RUNNERS.get(key)
        if runner is None:
            runner = backend_module(self.backend).open_runner(
                self.folder, threads=WORKER_THREADS, batch_size=self.batch_size
            )
            _WORKER_RUNNERS[key] = runner
        embedder = ExportedEmbedder(
            runner,
            self.preprocess,
            model_id=self.model_id,
            dim=self.dim,
            batch_size=self.batch_size,
            backend=self.backend,
            agreement=1.0,
        )
        return embedder.embed(images)


def accelerate(embedder: OpenClipEmbedder, backend: str, *, cache_dir: Path) -> Embedder:
    """``embedder`` running on ``backend`` via a cached, checked export; ``embedder`` itself on refusal."""
    module = backend_module(backend)
    tower, recipe = export_tower(embedder.encode_image)
    if tower is None:
        logger.warning(
            "%s: its image encoder is not a torch module, so it cannot be exported to %s; "
            "using torch",
            embedder.model_id,
            backend,
        )
        return embedder
    held_out = embedder.preprocess(held_out_images())
    versions = _export_versions() | module.library_versions()
    key = cache_key(embedder.model_id, backend, versions, tuple(held_out.shape[1:]), recipe=recipe)
    cache = ExportCache(cache_dir)
    entry = cache.load(backend, key)
    runner: Runner | None = None
    if entry is not None and entry.meta.get("status") == "accepted":
        runner = _open_runner(module, entry, cache, backend, key, embedder.batch_size)
        if runner is None:
            entry = None
    if entry is None:
        entry = cache.store(
            backend,
            key,
            lambda folder: _build(
                embedder, tower, recipe, module, backend, held_out, versions, folder
            ),
        )
        if entry.meta.get("status") == "accepted":
            runner = _open_runner(module, entry, cache, backend, key, embedder.batch_size)
    if runner is None or entry.meta.get("status") != "accepted":
        logger.warning(
            "%s export of %s refused: %s; using eager torch",
            backend,
            embedder.model_id,
            entry.meta.get("reason", "the export could not be opened"),
        )
        return embedder
    logger.info(
        "%s runs on %s (export %s, min cosine vs torch %.6f)",
        embedder.model_id,
        backend,
        entry.path,
        entry.meta["min_cosine"],
    )
    return ExportedEmbedder(
        runner,
        embedder.preprocess,
        model_id=embedder.model_id,
        dim=embedder.dim,
        batch_size=embedder.batch_size,
        backend=backend,
        agreement=float(entry.meta["min_cosine"]),
        export_key=key,
        export_dir=entry.path,
    )


def held_out_images() -> list[Image.Image]:
    """The fixed agreement batch: procedural photos of several sizes and aspect ratios."""
    from splitaudit.indexer.demo import synthetic_photo

    return [synthetic_photo(1000 + i, size) for i, size in enumerate(HELD_OUT_SIZES)]


def min_cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    """Lowest row-wise cosine between two feature matrices of the same shape."""
    return float(np.min(np.sum(_normalise(a) * _normalise(b), axis=1)))


def export_tower(encode_image: Callable[..., Any]) -> tuple[torch.nn.Module | None, str]:
    """The module to export for ``encode_image`` and the recipe's name (part of the cache key).

    A token-pooled open_clip ViT exports with its last block on the class token only
    (``cls_tower``, same numbers, ~7% fewer multiply-adds for ViT-B-32); anything else whole.
    """
    from splitaudit.indexer.embed.backends.cls_tower import RECIPE, cls_only_tower

    pruned = cls_only_tower(encode_image)
    if pruned is not None:
        return pruned, RECIPE
    return tower_module(encode_image), WHOLE_RECIPE


def _build(
    embedder: OpenClipEmbedder,
    tower: torch.nn.Module,
    recipe: str,
    module: Any,
    backend: str,
    held_out: torch.Tensor,
    versions: dict[str, str],
    folder: Path,
) -> dict[str, Any]:
    """Export into ``folder``, run the agreement check there; the entry's metadata."""
    meta: dict[str, Any] = {
        "model_id": embedder.model_id,
        "backend": backend,
        "versions": versions,
        "input_shape": list(held_out.shape[1:]),
        "recipe": recipe,
        "held_out": len(held_out),
    }
    onnx_file = folder / "export.onnx"
    try:
        export_onnx(tower, held_out.shape[1:], onnx_file)
        module.build(onnx_file, folder)
        runner = module.open_runner(
            folder, threads=runner_threads(), batch_size=embedder.batch_size
        )
        got = runner(held_out.contiguous().numpy())
    except Exception as exc:  # an architecture the exporter or backend cannot handle
        _clear(folder)
        return meta | {"status": "refused", "reason": f"export failed: {type(exc).__name__}: {exc}"}
    expected = embedder.embed_tensor(held_out)
    if got.shape != expected.shape:
        _clear(folder)
        return meta | {
            "status": "refused",
            "reason": f"export returns shape {got.shape}, eager torch {expected.shape}",
        }
    agreement = min_cosine(got, expected)
    if not agreement >= MIN_COSINE:
        _clear(folder)
        return meta | {
            "status": "refused",
            "min_cosine": agreement,
            "reason": f"it disagrees with eager torch (lowest cosine {agreement:.6f} < "
            f"{MIN_COSINE} over {len(held_out)} held-out images)",
        }
    return meta | {"status": "accepted", "min_cosine": agreement}


def export_onnx(tower: torch.nn.Module, input_shape: Sequence[int], path: Path) -> None:
    """Trace ``tower`` on a blank float32 batch into an ONNX file with a dynamic batch axis."""
    import torch

    example = torch.zeros((_EXAMPLE_BATCH, *input_shape), dtype=torch.float32)
    # nn.MultiheadAttention's inference fast path is a fused op ONNX has no mapping for
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            torch.onnx.export(
                tower,
                (example,),
                str(path),
                input_names=["pixels"],
                output_names=["features"],
                dynamic_axes={"pixels": {0: "n"}, "features": {0: "n"}},
                opset_version=_OPSET,
                dynamo=False,
            )
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    for warning in caught:
        logger.debug("onnx export warning: %s", warning.message)


def _open_runner(
    module: Any, entry: CacheEntry, cache: ExportCache, backend: str, key: str, batch_size: int
) -> Runner | None:
    try:
        runner: Runner = module.open_runner(
            entry.path, threads=runner_threads(), batch_size=batch_size
        )
    except Exception as exc:  # intact digests but unloadable (e.g. a library changed underneath)
        logger.warning(
            "cached %s export %s cannot be opened (%s); rebuilding it", backend, entry.path, exc
        )
        cache.discard(backend, key)
        return None
    return runner


def _export_versions() -> dict[str, str]:
    import onnx
    import torch

    return {"torch": torch.__version__, "onnx": onnx.__version__}


def tower_module(encode_image: Callable[..., Any]) -> torch.nn.Module | None:
    """The encoder as a module: itself, or a module calling the bound method of one."""
    import torch

    if isinstance(encode_image, torch.nn.Module):
        return encode_image
    owner = getattr(encode_image, "__self__", None)
    name = getattr(encode_image, "__name__", "")
    if not (isinstance(owner, torch.nn.Module) and name):
        return None

    class BoundTower(torch.nn.Module):
        """Wraps ``owner.<method>`` (e.g. ``CLIP.encode_image``) so the exporter can trace it."""

        def __init__(self) -> None:
            super().__init__()
            self.owner = owner

        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            return getattr(self.owner, name)(pixels)  # type: ignore[no-any-return]

    return BoundTower()


def _normalise(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _clear(folder: Path) -> None:
    for p in folder.iterdir():
        p.unlink()
