"""Inference backends side by side: eager torch vs ONNX Runtime vs OpenVINO, then the whole CLI.

Run: ``.venv/bin/python -m bench.embedding --backends [--n 64] [--rounds 3]
[--cli-n 1000] [--skip-cli] [--skip-fastdup]``

All figures come from one run:

- forward: images/s of the image tower alone on preprocessed batches of 32, for
  ``efficientnet-lite0`` (real weights) and ``ViT-B-32`` (its real open_clip config, **random
  weights: for timing only**), with 1 and 2 threads; rounds interleave the backends so machine
  noise hits all of them alike; the lowest cosine vs eager torch over every image is printed;
- cli: ``splitaudit index --model efficientnet-lite0 --backend B`` on the same ``--cli-n``
  JPEGs (``bench.photos``) for each backend, each in a fresh home (the export cache is
  pre-built, as a second run finds it), wall img/s and peak RSS of the process; plus fastdup
  (``/work/fastdup-venv``, bundled model, ``SENTRY_OPT_OUT=1``) on the same folder.

Targets (issue 13): CLI index with efficientnet-lite0 >= 2.5x today's (torch) img/s;
ViT-B-32 forward >= 1.5x eager.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.photos import make_photo_corpus

BACKENDS = ("torch", "onnxruntime", "openvino")
FASTDUP_PYTHON = Path("/work/fastdup-venv/bin/python")
_FASTDUP_SCRIPT = """
import sys, fastdup
fd = fastdup.create(work_dir=sys.argv[2], input_dir=sys.argv[1])
fd.run(verbose=False, overwrite=True)
"""


def _vit_b32_random() -> Any:
    """open_clip ViT-B-32 with its real config and random weights (timing only)."""
    import open_clip
    import torch

    from indexer.embed.embedder import OpenClipEmbedder

    torch.manual_seed(0)
    model, _, preprocess = open_clip.create_model_and_transforms("ViT-B-32", pretrained=None)
    model.eval()
    return OpenClipEmbedder(
        model.encode_image, preprocess, model_id="bench:ViT-B-32:random-weights", dim=512
    )


def _efficientnet() -> Any:
    from indexer.embed.loader import load_embedder

    return load_embedder("efficientnet-lite0")


def forward_table(n: int, rounds: int, cache: Path) -> None:
    """Print forward images/s per model, thread count and backend, with agreement."""
    import torch

    from bench.embedding import make_images
    from indexer.embed.backends.exported import ExportedEmbedder, accelerate, min_cosine

    images = make_images(n, 256, 640)
    for label, factory in (
        ("efficientnet-lite0", _efficientnet),
        ("ViT-B-32 (random weights)", _vit_b32_random),
    ):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            eager = factory()
            batches = [eager.preprocess(images[i : i + 32]) for i in range(0, n, 32)]
            arrays = [b.contiguous().numpy() for b in batches]
            runs: dict[str, Callable[[], np.ndarray]] = {
                "torch": lambda e=eager, bs=batches: np.concatenate([e.embed_tensor(b) for b in bs])
            }
            for backend in BACKENDS[1:]:
                fast = accelerate(eager, backend, cache_dir=cache)
                if isinstance(fast, ExportedEmbedder):
                    runs[backend] = lambda f=fast, xs=arrays: np.concatenate(
                        [f.embed_array(a) for a in xs]
                    )
            reference = runs["torch"]()
            agreement = {name: min_cosine(fn(), reference) for name, fn in runs.items()}
            times: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(rounds):
                for name, fn in runs.items():
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
            base = statistics.median(times["torch"])
            print(
                f"{label}, {threads} thread(s), batch 32, {n} images, median of {rounds} interleaved rounds"
            )
            for name in runs:
                med = statistics.median(times[name])
                print(
                    f"  {name:<12} {n / med:7.1f} img/s  {base / med:5.2f}x eager  "
                    f"min cosine vs eager {agreement[name]:.6f}"
                )


def _run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one child process."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code
        if code != 0:
            err.seek(0)
            print("   ", err.read().decode(errors="replace")[-800:])
    return wall, usage.ru_maxrss / 1024, code


def cli_table(n: int, work: Path, *, fastdup: bool) -> None:
    """Print whole-CLI ``index`` img/s and peak RSS per backend (and fastdup's) on ``n`` JPEGs."""
    paths = make_photo_corpus(
        Path(__file__).resolve().parent / ".cache" / "photos" / f"n{n}-s0", n=n, seed=0
    )
    folder = paths[0].parent
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SENTRY_OPT_OUT": "1"}
    env.pop("SPLITAUDIT_BACKEND", None)
    splitaudit = [sys.executable, "-m", "indexer.cli.main"]
    results: dict[str, tuple[float, float]] = {}
    one = work / "one"
    one.mkdir()
    (one / "0.jpg").write_bytes(paths[0].read_bytes())
    for backend in BACKENDS:
        home = work / f"home-{backend}"
        # a first run builds the export; the measured run finds it cached, as every later run does
        _run_measured(
            [
                *splitaudit,
                "index",
                str(one),
                "--corpus",
                "warm",
                "--home",
                str(home),
                "--model",
                "efficientnet-lite0",
                "--backend",
                backend,
            ],
            env,
        )
        wall, rss, code = _run_measured(
            [
                *splitaudit,
                "index",
                str(folder),
                "--corpus",
                "c",
                "--home",
                str(home),
                "--model",
                "efficientnet-lite0",
                "--backend",
                backend,
            ],
            env,
        )
        if code == 0:
            results[backend] = (n / wall, rss)
    if fastdup and FASTDUP_PYTHON.is_file():
        wall, rss, code = _run_measured(
            [str(FASTDUP_PYTHON), "-c", _FASTDUP_SCRIPT, str(folder), str(work / "fastdup")], env
        )
        if code == 0:
            results["fastdup 2.x"] = (n / wall, rss)
    base = results.get("torch", (float("nan"), 0.0))[0]
    print(
        f"whole CLI `splitaudit index --model efficientnet-lite0` on {n} JPEGs (wall, whole process)"
    )
    for name, (rate, rss) in results.items():
        print(f"  {name:<12} {rate:7.1f} img/s  {rate / base:5.2f}x torch  peak RSS {rss:7.0f} MiB")


def main(args: Any) -> None:
    """Entry point from ``bench.embedding --backends``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        work = Path(tmp)
        forward_table(args.n, args.rounds, work / "exports")
        if not args.skip_cli:
            cli_table(args.cli_n, work, fastdup=not args.skip_fastdup)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average after the run: {load} (on {os.cpu_count()} cpus)")
