"""ONNX Runtime backend: the exported ONNX graph run by ``onnxruntime`` on CPU (float32)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import numpy.typing as npt

MODEL_FILE = "model.onnx"


def library_versions() -> dict[str, str]:
    """Versions that change what this backend builds or runs (part of the cache key)."""
    import onnxruntime

    return {"onnxruntime": onnxruntime.__version__}


def build(onnx_file: Path, dest: Path) -> None:
    """Place the exported graph in the cache folder ``dest`` (ONNX Runtime runs it as is)."""
    shutil.move(onnx_file, dest / MODEL_FILE)


def open_runner(folder: Path, *, threads: int, batch_size: int) -> OnnxRuntimeRunner:
    """The runner for the entry in ``folder`` (the whole batch in one session run)."""
    return OnnxRuntimeRunner(folder, threads=threads)


class OnnxRuntimeRunner:
    """Runs ``(n, 3, H, W)`` float32 batches through an ONNX Runtime CPU session."""

    def __init__(self, folder: Path, *, threads: int) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # idle workers sleep instead of spinning: on a shared CPU a spinning worker burns the
        # time slice another thread (or process) needs; measured faster there (bench/backends.py)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"]
        )
        self._input = self._session.get_inputs()[0].name

    def __call__(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Raw (not normalised) features of ``batch``."""
        out = self._session.run(None, {self._input: np.ascontiguousarray(batch, dtype=np.float32)})
        return np.asarray(out[0], dtype=np.float32)
