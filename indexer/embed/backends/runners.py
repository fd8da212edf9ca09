"""Opening an exported model's runner: which backend module serves it, and with how many threads.

Shared by ``exported`` (export, then open) and ``launch`` (open straight from a launch record),
so neither imports the other's private helpers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from splitaudit.indexer.cpus import usable_cpus


def backend_module(backend: str) -> Any:
    """The module whose ``open_runner`` runs exports on ``backend`` (onnxruntime or openvino)."""
    if backend == "onnxruntime":
        from splitaudit.indexer.embed.backends import onnx

        return onnx
    if backend == "openvino":
        from splitaudit.indexer.embed.backends import openvino

        return openvino
    raise ValueError(f"no exported backend named {backend!r}")


def runner_threads() -> int:
    """Threads for a runner: torch's intra-op count (as set, once torch is loaded), else its default."""
    if "torch" in sys.modules:
        import torch

        return max(1, torch.get_num_threads())
    return default_threads()


def default_threads() -> int:
    """The intra-op thread count torch would pick, without importing torch.

    ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` when set, else the physical cores (torch's
    default), else the logical CPUs.
    """
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return min(_physical_cores() or os.cpu_count() or 1, usable_cpus())


def _physical_cores() -> int:
    """Distinct physical cores (Linux sysfs), 0 where unknown."""
    if not sys.platform.startswith("linux"):
        return 0
    cores = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        for name in ("core_cpus_list", "thread_siblings_list"):
            siblings = cpu / "topology" / name
            try:
                cores.add(siblings.read_text().strip())
                break
            except OSError:
                continue
    return len(cores)
