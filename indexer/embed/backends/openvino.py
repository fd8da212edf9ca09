"""OpenVINO backend: the exported ONNX graph converted to OpenVINO IR, compiled for CPU in float32.

Both the saved IR (``compress_to_fp16=False``) and the compiled model
(``INFERENCE_PRECISION_HINT=f32``) stay in float32: on CPUs with AMX/AVX-512 BF16 OpenVINO
would otherwise run in bf16, which moves cosines enough to shift the audit thresholds.

With more than one thread the batch is split across parallel inference streams of one or a
few threads each, instead of one request whose every layer is shared out across all threads:
streams never wait for each other between layers, which on a busy 2-core machine is the
difference (bench/backends.py, docs/indexing.md).

Each request runs ``REQUEST_BATCH`` images on a model reshaped to that static batch: one image
at a time keeps a CNN's activations in cache, and a static shape skips the per-call shape
inference and buffer reallocation of the dynamic-batch graph. EfficientNet-Lite0 on a 2-core
AVX2 EPYC at load ~10 (``python -m bench.index_stages --forward-variants``): 19.5-20.2 CPU ms
per image on two streams (16.9-18.8 on one) against 20.4-22.2 for the dynamic graph at 4 images
per stream; the vectors are bit for bit the same. Whole ``index`` runs: docs/indexing.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.embed.backends.cache import META_FILE

MODEL_FILE = "model.xml"  # + model.bin beside it
# Images per stream at least: 4 keeps a stream's activations in cache (EfficientNet-Lite0 runs
# 13% cheaper per image than at 8-16; ViT-B-32's products are as fast: bench/index_vs_fastdup.py).
MIN_STREAM_BATCH = 4
# Images per inference request, on a model reshaped to that static batch (module docstring).
REQUEST_BATCH = 1
# OpenVINO's compiled-model cache, inside the export entry (removed with it): a run after the
# first imports the compiled blob instead of compiling the IR (EfficientNet-Lite0: 0.19 -> 0.06
# CPU-s, 0.54 -> 0.18 s wall per process start; docs/indexing.md).
COMPILED_CACHE = "compiled"

logger = logging.getLogger(__name__)


def library_versions() -> dict[str, str]:
    """Versions that change what this backend builds or runs (part of the cache key)."""
    import openvino

    return {"openvino": openvino.__version__}


def build(onnx_file: Path, dest: Path) -> None:
    """Convert the exported ONNX graph into float32 OpenVINO IR in the cache folder ``dest``."""
    import openvino

    model = openvino.Core().read_model(str(onnx_file))
    openvino.save_model(model, str(dest / MODEL_FILE), compress_to_fp16=False)
    onnx_file.unlink()


def stream_count(threads: int, batch_size: int) -> int:
    """Parallel streams for ``threads`` threads and batches of ``batch_size``: one per thread,
    but no stream gets fewer than ``MIN_STREAM_BATCH`` images of a batch."""
    if threads < 1 or batch_size < 1:
        raise ValueError(f"threads and batch_size must be >= 1, got {threads}, {batch_size}")
    return max(1, min(threads, batch_size // MIN_STREAM_BATCH))


def open_runner(folder: Path, *, threads: int, batch_size: int) -> OpenVinoRunner:
    """The runner for the entry in ``folder``: ``REQUEST_BATCH`` images per request, its streams
    chosen by ``stream_count``."""
    return OpenVinoRunner(
        folder,
        threads=threads,
        streams=stream_count(threads, batch_size),
        request_batch=REQUEST_BATCH,
    )


class OpenVinoRunner:
    """Runs ``(n, 3, H, W)`` float32 batches through an OpenVINO CPU model compiled in f32.

    ``streams`` > 1 splits each batch into that many parts run at once (``threads`` shared
    among them); 1 runs the batch as one request on all ``threads``. With ``request_batch``
    the model is reshaped to that static batch and every request runs that many images (a
    batch's last request is padded); ``None`` keeps the dynamic batch, one request per part.
    """

    def __init__(
        self,
        folder: Path,
        *,
        threads: int,
        streams: int = 1,
        request_batch: int | None = None,
    ) -> None:
        import openvino

        if streams < 1:
            raise ValueError(f"streams must be >= 1, got {streams}")
        if request_batch is not None and request_batch < 1:
            raise ValueError(f"request_batch must be >= 1, got {request_batch}")
        core = openvino.Core()
        config: dict[str, object] = {
            "INFERENCE_PRECISION_HINT": "f32",
            "INFERENCE_NUM_THREADS": max(threads, streams),
        }
        if streams == 1:
            config["PERFORMANCE_HINT"] = "LATENCY"
        if max(threads, streams) == 1:
            # one thread of one of several processes (the decode workers' forward passes): pinned,
            # every process's thread would be put on the same core (``threads_pinned``)
            config["ENABLE_CPU_PINNING"] = False
        else:
            config["PERFORMANCE_HINT"] = "THROUGHPUT"
            config["NUM_STREAMS"] = streams
        self.request_batch = request_batch
        self._compiled = _compile(core, folder, config, request_batch)
        if (
            self.request_batch is not None
            and self._compiled.input(0).get_partial_shape()[0].is_dynamic
        ):
            self.request_batch = None  # the model would not take a static batch
        self._requests = [self._compiled.create_infer_request() for _ in range(streams)]

    def __call__(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Raw (not normalised) features of ``batch``."""
        batch = np.ascontiguousarray(batch, dtype=np.float32)
        if self.request_batch is not None:
            return self._static(batch, self.request_batch)
        if len(self._requests) == 1 or len(batch) < 2:
            return self._run([batch])[0]
        parts = np.array_split(batch, min(len(self._requests), len(batch)))
        return np.concatenate(self._run([np.ascontiguousarray(part) for part in parts]))

    def _static(self, batch: npt.NDArray[np.float32], size: int) -> npt.NDArray[np.float32]:
        """``batch`` in requests of exactly ``size`` images, ``len(self._requests)`` at a time."""
        n = len(batch)
        if n % size:  # pad the last request with copies of the last image (rows dropped)
            pad = np.repeat(batch[-1:], size - n % size, axis=0)
            batch = np.concatenate([batch, pad])
        parts = [batch[i : i + size] for i in range(0, len(batch), size)]
        streams = len(self._requests)
        rows: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(parts), streams):
            rows += self._run(parts[start : start + streams])
        return np.concatenate(rows)[:n]

    def _run(self, parts: list[npt.NDArray[np.float32]]) -> list[npt.NDArray[np.float32]]:
        """Each of ``parts`` (at most one per request) on its own request, at once; their
        outputs. The requests read the parts in place (``share_inputs``: the parts outlive
        every wait) and reuse their output buffers on the next call, so outputs are copied out."""
        running = list(zip(self._requests, parts, strict=False))
        if len(running) == 1:
            running[0][0].infer({0: running[0][1]}, share_inputs=True)
        else:
            for request, part in running:
                request.start_async({0: part}, share_inputs=True)
            for request, _ in running:
                request.wait()
        return [np.array(request.get_output_tensor(0).data, copy=True) for request, _ in running]


def _compile(
    core: Any, folder: Path, config: dict[str, object], request_batch: int | None = None
) -> Any:
    """The model in ``folder`` compiled for CPU (reshaped to the static ``request_batch`` when
    given), through the compiled-model cache beside it when the export is finished and its
    folder writable. A cache that cannot be used (a blob half written by another process, one
    from another OpenVINO build) costs a plain compile, never the run."""
    model: Any = str(folder / MODEL_FILE)
    # Only beside a finished export (its meta.json written): an entry being built or checked
    # is a temporary folder whose files are listed and digested.
    cached = (folder / META_FILE).is_file() and os.access(folder, os.W_OK)
    saved: Path | None = None
    if request_batch is not None:
        saved = _saved_static_ir(core, folder, request_batch) if cached else None
        model = str(saved) if saved else _static_batch(core, folder / MODEL_FILE, request_batch)
    if cached:
        try:
            return core.compile_model(
                model, "CPU", {**config, "CACHE_DIR": str(folder / COMPILED_CACHE)}
            )
        except RuntimeError as exc:
            logger.info(
                "OpenVINO's compiled-model cache in %s is unusable (%s); compiling", folder, exc
            )
            if saved is not None:  # perhaps the saved IR itself: made again by the next start
                shutil.rmtree(saved.parent, ignore_errors=True)
            if request_batch is not None:
                model = _static_batch(core, folder / MODEL_FILE, request_batch)
    return core.compile_model(model, "CPU", config)


def _saved_static_ir(core: Any, folder: Path, request_batch: int) -> Path | None:
    """The export's IR at the static ``request_batch``, saved once in ``compiled/`` beside the
    compiled blobs, or None where it cannot be (a model that keeps its dynamic batch, a folder
    that cannot be written).

    A start then compiles a file, which OpenVINO's cache serves from its blob without parsing
    the IR: reading, reshaping and hashing the model in memory cost EfficientNet-Lite0 ~0.5
    CPU-s per process start, the saved file ~0.1. Written in a temporary folder renamed into
    place, so no start sees half of it; removed with the export entry, like the blobs.
    """
    target = folder / COMPILED_CACHE / f"static-batch-{request_batch}"
    if (target / MODEL_FILE).is_file():
        return target / MODEL_FILE
    model = _static_batch(core, folder / MODEL_FILE, request_batch)
    if model.input(0).get_partial_shape().is_dynamic:
        return None
    import openvino

    tmp: Path | None = None
    try:
        target.parent.mkdir(exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".static.", dir=target.parent))
        openvino.save_model(model, str(tmp / MODEL_FILE), compress_to_fp16=False)
        os.rename(tmp, target)
    except OSError as exc:  # another start renamed its copy first, or a read-only folder
        logger.debug("static-batch IR not saved in %s: %s", target, exc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return target / MODEL_FILE if (target / MODEL_FILE).is_file() else None
    return target / MODEL_FILE


def _static_batch(core: Any, path: Path, request_batch: int) -> Any:
    """The model at ``path`` with its batch fixed to ``request_batch``, or as it is when its
    input cannot be reshaped (the caller then sees a dynamic batch)."""
    model = core.read_model(str(path))
    shape = model.input(0).get_partial_shape()
    if shape.rank.is_dynamic or len(shape) < 1:
        return model
    try:
        model.reshape({0: [request_batch, *(shape[i] for i in range(1, len(shape)))]})
    except RuntimeError as exc:
        logger.info("%s keeps its dynamic batch (%s)", path, exc)
        return core.read_model(str(path))
    return model
