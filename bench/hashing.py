"""Hashing throughput of ``extract_features`` against imagededup and the JPEG decode floor.

Run: ``.venv/bin/python -m bench.hashing [--n 1000] [--dir bench/.cache/photos]``

All figures come from one run on the same files (see ``bench.photos``):

- ours: read bytes + ``extract_features`` (SHA-256, pixel digest, pHash, dHash, mirrored
  pHash, EXIF/PNG text), one process;
- floor: ``Image.open; draft("RGB", (256, 256)); load()`` only, one process;
- imagededup: ``PHash().encode_images(image_dir=..., num_enc_workers=0)``, one worker;
- pool: ours in a 2-process pool (workers warmed up first) vs one process;
- floor at the smallest DCT scale: ``draft("RGB", (32, 32))``, what pHash / dHash / the 32 px
  thumbnail alone would need (the pixel digest pins the 256 request, see docs/indexing.md);
- cli: the whole ``splitaudit index --no-embed`` process (fresh home each run) with
  ``--workers 1`` and ``--workers 2``, runs alternated, best of ``--cli-rounds``.

Targets (issue "Indexer"): ours >= 8x imagededup, >= 70% of the floor, 2 workers >= 1.7x one;
(issue 13): whole-process --no-embed >= 5x imagededup, --workers 2 >= 1.8x --workers 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from bench.photos import make_photo_corpus
from indexer.features.extract import extract_features

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "photos"


@dataclass(frozen=True)
class Rate:
    """Images per second by wall clock and by this process's CPU time.

    On a shared machine other processes steal wall time; CPU-time rates are the
    steadier basis for single-process ratios.
    """

    wall: float
    cpu: float

    def __str__(self) -> str:
        return f"{self.wall:8.1f} img/s wall  {self.cpu:8.1f} img/s cpu"


def _ours(path: Path) -> int:
    features, _ = extract_features(path.read_bytes())
    return features.phash


def _floor(path: Path) -> int:
    with Image.open(path) as im:
        im.draft("RGB", (256, 256))
        im.load()
        return im.width


def _floor_smallest(path: Path) -> int:
    with Image.open(path) as im:
        im.draft("RGB", (32, 32))
        im.load()
        return im.width


def _cli_seconds(folder: Path, workers: int) -> float:
    """Wall seconds of one whole ``splitaudit index --no-embed`` process into a fresh home."""
    with tempfile.TemporaryDirectory(prefix="bench-hashing-") as home:
        cmd = [
            sys.executable,
            "-m",
            "indexer.cli.main",
            "index",
            str(folder),
            "--corpus",
            "c",
            "--home",
            home,
            "--no-embed",
            "--workers",
            str(workers),
        ]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start


def _cli_rates(folder: Path, count: int, rounds: int) -> dict[int, float]:
    """Best whole-process img/s for --workers 1 and 2, runs alternated."""
    best: dict[int, float] = {1: 0.0, 2: 0.0}
    for _ in range(rounds):
        for workers in (1, 2):
            best[workers] = max(best[workers], count / _cli_seconds(folder, workers))
    return best


def _run_serial(fn: Callable[[Path], int], paths: Sequence[Path]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for one pass."""
    wall, cpu = time.perf_counter(), time.process_time()
    for path in paths:
        fn(path)
    return time.perf_counter() - wall, time.process_time() - cpu


def _best_rate(fn: Callable[[Path], int], paths: Sequence[Path], repeat: int) -> Rate:
    runs = [_run_serial(fn, paths) for _ in range(repeat)]
    return Rate(len(paths) / min(r[0] for r in runs), len(paths) / min(r[1] for r in runs))


@dataclass(frozen=True)
class PoolRate:
    """A pool's best wall rate, plus how much CPU its workers spent and obtained."""

    wall: float
    cpu_per_image: float  # seconds of worker CPU per image (includes pickling, IPC)
    cores: float  # average cores the workers obtained while running


def _pool_rate(paths: Sequence[Path], workers: int, repeat: int) -> PoolRate:
    chunk = max(1, len(paths) // (workers * 16))
    warm = list(paths[: workers * 8])
    rates = []
    # Worker CPU is only visible once the workers have exited (RUSAGE_CHILDREN).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_ours, warm, chunksize=1))  # start and warm the workers
        for _ in range(repeat):
            start = time.perf_counter()
            list(pool.map(_ours, paths, chunksize=chunk))
            rates.append(len(paths) / (time.perf_counter() - start))
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    images = len(warm) + repeat * len(paths)
    return PoolRate(max(rates), cpu / images, cpu / wall)


def _cpu_with_children() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _imagededup_rate(folder: Path, count: int) -> Rate:
    from imagededup.methods import PHash

    hasher = PHash(verbose=False)
    # num_enc_workers=0 still hashes in a one-process multiprocessing.Pool: count the
    # CPU time of that (joined) child too.
    wall, cpu = time.perf_counter(), _cpu_with_children()
    encodings = hasher.encode_images(image_dir=str(folder), num_enc_workers=0)
    wall, cpu = time.perf_counter() - wall, _cpu_with_children() - cpu
    if len(encodings) != count:
        print(f"  note: imagededup encoded {len(encodings)} files, expected {count}")
    return Rate(len(encodings) / wall, len(encodings) / cpu)


def main(argv: Sequence[str] | None = None) -> None:
    """Generate/reuse the photo corpus, measure every variant, print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="number of JPEGs (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="photo cache folder")
    parser.add_argument("--repeat", type=int, default=3, help="passes per variant; best kept")
    parser.add_argument("--skip-imagededup", action="store_true")
    parser.add_argument("--skip-cli", action="store_true", help="leave out the whole-process runs")
    parser.add_argument(
        "--cli-rounds", type=int, default=2, help="alternated whole-process runs per variant"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    folder: Path = args.dir / f"n{args.n}-s{args.seed}"
    paths = make_photo_corpus(folder, n=args.n, seed=args.seed)
    total_mb = sum(p.stat().st_size for p in paths) / 1e6
    sizes = []
    for p in paths:
        with Image.open(p) as im:
            sizes.append(max(im.size))
    sizes.sort()
    print(
        f"corpus: {len(paths)} JPEGs, {total_mb:.0f} MB, long side "
        f"min {sizes[0]} / median {sizes[len(sizes) // 2]} / max {sizes[-1]} px, "
        f"cpus {os.cpu_count()}"
    )

    _run_serial(_floor, paths)  # warm the page cache and Pillow's plugins
    floor = _best_rate(_floor, paths, args.repeat)
    smallest = _best_rate(_floor_smallest, paths, args.repeat)
    ours = _best_rate(_ours, paths, args.repeat)
    pool2 = _pool_rate(paths, 2, args.repeat)
    dedup = None if args.skip_imagededup else _imagededup_rate(folder, len(paths))
    cli = None if args.skip_cli else _cli_rates(folder, len(paths), args.cli_rounds)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average after the run: {load} (on {os.cpu_count()} cpus)")
    print(f"decode floor (open+draft+load)  {floor}")
    print(f"decode floor, smallest scale    {smallest}")
    print(f"ours, 1 process                 {ours}")
    print(
        f"ours, 2-process pool            {pool2.wall:8.1f} img/s wall  "
        f"(workers got {pool2.cores:.2f} cores; {pool2.cpu_per_image * 1e3:.2f} ms CPU/image "
        f"vs {1e3 / ours.cpu:.2f} ms in-process)"
    )
    if dedup is not None:
        print(f"imagededup PHash, 1 process     {dedup}")
    print("ratios, wall / cpu (target):")
    if dedup is not None:
        print(
            f"  ours / imagededup   {ours.wall / dedup.wall:6.2f}x / {ours.cpu / dedup.cpu:5.2f}x"
            "  (>= 8x)"
        )
        print(
            f"  floor / imagededup  {floor.wall / dedup.wall:6.2f}x / {floor.cpu / dedup.cpu:5.2f}x"
            "  (the ceiling for the line above)"
        )
    print(
        f"  ours / floor        {ours.wall / floor.wall:6.1%} / {ours.cpu / floor.cpu:5.1%}  (>= 70%)"
    )
    print(f"  2 workers / 1       {pool2.wall / ours.wall:6.2f}x wall  (>= 1.7x)")
    print(f"  ours / smallest-scale floor {ours.cpu / smallest.cpu:6.1%} cpu")
    if cli is not None:
        print(
            f"whole process `index --no-embed`: --workers 1 {cli[1]:7.1f} img/s, --workers 2 {cli[2]:7.1f} img/s"
        )
        print(f"  --workers 2 / 1     {cli[2] / cli[1]:6.2f}x wall  (>= 1.8x)")
        print(f"  --workers 1 / smallest-scale floor {cli[1] / smallest.wall:6.1%} wall  (>= 80%)")
        if dedup is not None:
            print(f"  --workers 1 / imagededup {cli[1] / dedup.wall:6.2f}x wall  (>= 5x)")
    projected = 2 / (pool2.cpu_per_image * ours.cpu)
    print(
        f"  2 workers / 1       {projected:6.2f}x with 2 free cores (projected from CPU/image; "
        "equals the wall ratio on an idle machine)"
    )


if __name__ == "__main__":
    main()
