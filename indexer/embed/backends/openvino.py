"""OpenVINO backend: the exported ONNX graph converted to OpenVINO IR, compiled for CPU in float32.

Both the saved IR (``compress_to_fp16=False``) and the compiled model
(``INFERENCE_PRECISION_HINT=f32``) stay in float32: on CPUs with AMX/AVX-512 BF16 OpenVINO
would otherwise run in bf16, which moves cosines enough to shift the audit thresholds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

MODEL_FILE = "model.xml"  # + model.bin beside it


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


class OpenVinoRunner:
    """Runs ``(n, 3, H, W)`` float32 batches through an OpenVINO CPU model compiled in f32."""

    def __init__(self, folder: Path, *, threads: int) -> None:
        import openvino

        core = openvino.Core()
        config = {
            "INFERENCE_PRECISION_HINT": "f32",
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",
        }
        self._compiled = core.compile_model(str(folder / MODEL_FILE), "CPU", config)
        self._request = self._compiled.create_infer_request()

    def __call__(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Raw (not normalised) features of ``batch``."""
        self._request.infer({0: np.ascontiguousarray(batch, dtype=np.float32)})
        # the output buffer is reused by the next call: copy it out
        return np.array(self._request.get_output_tensor(0).data, dtype=np.float32, copy=True)
