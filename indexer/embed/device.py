"""Which device embeds: ``auto`` (CUDA, then MPS, then CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from splitaudit.indexer.errors import UsageError

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N, mps"
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")
# Images per forward pass: what fits comfortably in memory and keeps the device busy. On a CPU
# it follows the threads: a few images per inference stream keep each stream's activations
# in cache (bench/index_vs_fastdup.py: 4 per stream costs 13% less CPU than 16 for
# EfficientNet-Lite0, the same for ViT-B-32, at half the peak memory).
EMBED_BATCH = {"mps": 64, "cuda": 256}
CPU_IMAGES_PER_THREAD = 4
CPU_EMBED_BATCH_MIN, CPU_EMBED_BATCH_MAX = 8, 64


def cpu_embed_batch(threads: int | None = None) -> int:
    """Images per forward pass on a CPU with ``threads`` inference threads (default: torch's)."""
    if threads is None:
        from splitaudit.indexer.embed.backends.runners import default_threads

        threads = default_threads()
    return min(CPU_EMBED_BATCH_MAX, max(CPU_EMBED_BATCH_MIN, CPU_IMAGES_PER_THREAD * threads))


# Images per pipeline batch (one DB transaction); at least one forward pass.
PIPELINE_BATCH = {"cpu": 64, "mps": 128, "cuda": 256}


class DeviceProbe(Protocol):
    """What the machine has (``TorchProbe`` asks torch; tests pass a double)."""

    def cuda_count(self) -> int:
        """Number of usable CUDA devices (0 without CUDA)."""
        ...

    def cuda_name(self, index: int) -> str:
        """The name of CUDA device ``index``."""
        ...

    def mps_available(self) -> bool:
        """Whether Apple's Metal backend is usable."""
        ...


class TorchProbe:
    """The devices torch can use on this machine."""

    def cuda_count(self) -> int:
        """``torch.cuda.device_count()`` when CUDA is available, else 0.

        0 without importing torch on a Linux machine with no GPU device nodes (no NVIDIA,
        ROCm or WSL GPU driver), where torch could see none either.
        """
        if _no_gpu_devices() or importlib.util.find_spec("torch") is None:
            return 0  # the light core has no torch: embedding says which extra to install
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0

    def cuda_name(self, index: int) -> str:
        """``torch.cuda.get_device_name(index)``."""
        import torch

        return str(torch.cuda.get_device_name(index))

    def mps_available(self) -> bool:
        """``torch.backends.mps.is_available()`` (False off macOS, without importing torch)."""
        if sys.platform != "darwin":
            return False
        import torch

        mps = getattr(torch.backends, "mps", None)
        return bool(mps is not None and mps.is_available())


@dataclass(frozen=True, slots=True)
class ResolvedDevice:
    """The device a run embeds on, how it was chosen, and its default batch sizes."""

    device: str  # a torch device string: cpu, cuda:0, mps
    requested: str
    description: str  # e.g. "cuda:0 (NVIDIA H200)"

    @property
    def kind(self) -> str:
        """``cpu``, ``cuda`` or ``mps``."""
        return self.device.split(":", 1)[0]

    @property
    def embed_batch(self) -> int:
        """Images per forward pass on this device."""
        return cpu_embed_batch() if self.kind == "cpu" else EMBED_BATCH[self.kind]

    @property
    def pipeline_batch(self) -> int:
        """Images per pipeline batch (and DB transaction) on this device."""
        return PIPELINE_BATCH[self.kind]

    def summary(self) -> str:
        """``device cuda:0 (NVIDIA H200), chosen by auto`` for run summaries."""
        how = "chosen by auto" if self.requested == "auto" else "requested"
        return f"device {self.description}, {how}"


def available_devices(probe: DeviceProbe) -> list[str]:
    """Every device this machine offers, in ``auto``'s order of preference (CPU last)."""
    found = [f"cuda:{i}" for i in range(probe.cuda_count())]
    if probe.mps_available():
        found.append("mps")
    return [*found, "cpu"]


def resolve_device(requested: str, probe: DeviceProbe | None = None) -> ResolvedDevice:
    """The device named by ``requested``; ``UsageError`` naming the available ones when it is absent."""
    probe = probe or TorchProbe()
    text = requested.strip().lower()
    m = _DEVICE.match(text)
    if m is None or (m.group(2) is not None and m.group(1) != "cuda"):
        raise UsageError(f"unknown device {requested!r}: use one of {DEVICE_CHOICES}")
    kind, index = m.group(1), m.group(2)
    available = available_devices(probe)
    if kind == "auto":
        chosen = available[0]
    elif kind == "cuda":
        chosen = f"cuda:{int(index or 0)}"
    else:
        chosen = kind
    if chosen not in available:
        raise UsageError(
            f"device {requested!r} is not available on this machine; available: {', '.join(available)}"
            + (
                " (torch sees no CUDA GPU: check the driver and that torch was built with CUDA)"
                if kind == "cuda" and not any(d.startswith("cuda") for d in available)
                else ""
            )
        )
    description = chosen
    if chosen.startswith("cuda:"):
        description = f"{chosen} ({probe.cuda_name(int(chosen.split(':')[1]))})"
    return ResolvedDevice(device=chosen, requested=text, description=description)


def _no_gpu_devices() -> bool:
    """True on Linux when /dev has no GPU device node torch.cuda could use."""
    if not sys.platform.startswith("linux"):
        return False
    dev = Path("/dev")
    return not (any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists() or (dev / "dxg").exists())
