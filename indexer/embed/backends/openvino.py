"""OpenVINO backend: the exported ONNX graph converted to OpenVINO IR, compiled for CPU in float32.

Both the saved IR (``compress_to_fp16=False``) and the compiled model
(``INFERENCE_PRECISION_HINT=f32``) stay in float32: on CPUs with AMX/AVX-512 BF16 OpenVINO
would otherwise run in bf16, which moves cosines enough to shift the audit thresholds.

With more than one thread the batch is split across parallel inference streams of one or a
few threads each, instead of one request whose every layer is shared out across all threads:
streams never wait for each other between layers, which on a busy 2-core machine is the
difference (bench/backends.py, docs/indexing.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from splitaudit.indexer.embed.backends.cache import META_FILE

MODEL_FILE = "model.xml"  # + model.bin beside it
# Images per stream at least: 4 keeps a stream's activations in cache (EfficientNet-Lite0 runs
# 13% cheaper per image than at 8-16; ViT-B-32's products are as fast: bench/index_vs_fastdup.py).
MIN_STREAM_BATCH = 4
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
    """The runner for the entry in ``folder``, its streams chosen by ``stream_count``."""
    return OpenVinoRunner(folder, threads=threads, streams=stream_count(threads, batch_size))


class OpenVinoRunner:
    """Runs ``(n, 3, H, W)`` float32 batches through an OpenVINO CPU model compiled in f32.

    ``streams`` > 1 splits each batch into that many parts run at once (``threads`` shared
    among them); 1 runs the batch as one request on all ``threads``.
    """

    def __init__(self, folder: Path, *, threads: int, streams: int = 1) -> None:
        import openvino

        if streams < 1:
            raise ValueError(f"streams must be >= 1, got {streams}")
        core = openvino.Core()
        config: dict[str, object] = {
            "INFERENCE_PRECISION_HINT": "f32",
            "INFERENCE_NUM_THREADS": max(threads, streams),
        }
        if streams == 1:
            config["PERFORMANCE_HINT"] = "LATENCY"
        else:
            config["PERFORMANCE_HINT"] = "THROUGHPUT"
            config["NUM_STREAMS"] = streams
        self._compiled = _compile(core, folder, config)
        self._requests = [self._compiled.create_infer_request() for _ in range(streams)]

    def __call__(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Raw (not normalised) features of ``batch``."""
        batch = np.ascontiguousarray(batch, dtype=np.float32)
        # share_inputs: the requests read the batch in place (it outlives them) instead of
        # copying it into their own input tensors first
        if len(self._requests) == 1 or len(batch) < 2:
            self._requests[0].infer({0: batch}, share_inputs=True)
            # the output buffer is reused by the next call: copy it out
            return np.array(self._requests[0].get_output_tensor(0).data, copy=True)
        parts = np.array_split(batch, min(len(self._requests), len(batch)))
        inputs = [np.ascontiguousarray(part) for part in parts]  # alive until every wait returns
        running = list(zip(self._requests, inputs, strict=False))
        for request, part in running:
            request.start_async({0: part}, share_inputs=True)
        for request, _ in running:
            request.wait()
        return np.concatenate(
            [np.array(request.get_output_tensor(0).data, copy=True) for request, _ in running]
        )


def _compile(core: Any, folder: Path, config: dict[str, object]) -> Any:
    """The model in ``folder`` compiled for CPU, through the compiled-model cache beside it when
    the export is finished and its folder writable. A cache that cannot be used (a blob half written by another process,
    one from another OpenVINO build) costs a plain compile, never the run."""
    model = str(folder / MODEL_FILE)
    # Only beside a finished export (its meta.json written): an entry being built or checked
    # is a temporary folder whose files are listed and digested.
    if (folder / META_FILE).is_file() and os.access(folder, os.W_OK):
        try:
            return core.compile_model(
                model, "CPU", {**config, "CACHE_DIR": str(folder / COMPILED_CACHE)}
            )
        except RuntimeError as exc:
            logger.info(
                "OpenVINO's compiled-model cache in %s is unusable (%s); compiling", folder, exc
            )
    return core.compile_model(model, "CPU", config)
