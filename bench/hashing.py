"""Hashing throughput of ``extract_features`` against imagededup and the JPEG decode floor.

Run: ``.venv/bin/python -m bench.hashing [--n 1000] [--dir bench/.cache/photos]
[--baseline-tree PATH]``

All figures come from one run on the same files (see ``bench.photos``):

- floor: ``Image.open; draft("RGB", (256, 256)); load()`` only (what an embedding run decodes);
- floor at the smallest DCT scale: ``draft("RGB", (32, 32))``, what pHash / dHash need and
  what a hash-only run decodes (decode at need, ``extract_features(hashes_only=True)``);
- ours, embedding decode: read bytes + ``extract_features`` (SHA-256, pixel digest, stream
  digest, pHash, dHash, mirrored pHash, EXIF/PNG text), one process;
- ours, hash-only decode: the same with ``hashes_only=True`` (what ``index --no-embed`` runs);
- imagededup: ``PHash().encode_images(image_dir=...)`` with ``num_enc_workers=0`` (one worker)
  and with its default (one worker per CPU);
- pool: ours (hash-only) in a 2-process pool (workers warmed up first) vs one process;
- cli: the whole ``splitaudit index --no-embed`` process (fresh home each run) with
  ``--workers 1``, ``--workers 2`` and the default ``auto``, runs alternated, best of
  ``--cli-rounds``; with ``--baseline-tree`` also the same command from another checkout (e.g.
  a worktree of the previous release) in the same rounds, for a before/after ratio. Then the
  same with the folder given ``--cli-copies`` times (hard-linked copies: separate shards): a process
  pays ~1 s to start (interpreter, imports, database), which weighs 20% on 1,000 images.

Targets (issue 13): whole-process --no-embed >= 80% of the smallest-scale floor and >= 5x
imagededup; --workers 2 >= 1.8x --workers 1.
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
from splitaudit.indexer.features.extract import extract_features

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


def _ours_hashes_only(path: Path) -> int:
    features, _ = extract_features(path.read_bytes(), hashes_only=True)
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


def _cli_seconds(folders: Sequence[Path], workers: str, tree: Path | None = None) -> float:
    """Wall seconds of one whole ``splitaudit index --no-embed`` process into a fresh home.

    ``tree``: run that checkout's code instead of this one (``PYTHONPATH`` and working folder:
    ``python -m`` puts the working folder first on ``sys.path``; same interpreter).
    """
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree.resolve())
    with tempfile.TemporaryDirectory(prefix="bench-hashing-") as home:
        cmd = [sys.executable, "-m", "splitaudit.indexer.cli.main", "index"]
        cmd += [str(f.absolute()) for f in folders] + ["--corpus", "c"]
        cmd += ["--home", home, "--no-embed", "--workers", workers]
        start = time.perf_counter()
        subprocess.run(
            cmd,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=None if tree is None else tree.resolve(),
        )
        return time.perf_counter() - start


def _cli_rates(
    folders: Sequence[Path], count: int, rounds: int, baseline: Path | None
) -> dict[str, float]:
    """Best whole-process img/s per variant, variants alternated within each round."""
    variants: dict[str, tuple[str, Path | None]] = {
        "1": ("1", None),
        "2": ("2", None),
        "auto": ("auto", None),
    }
    if baseline is not None:
        variants |= {"baseline 1": ("1", baseline), "baseline 2": ("2", baseline)}
    best = dict.fromkeys(variants, 0.0)
    for _ in range(rounds):
        for name, (workers, tree) in variants.items():
            best[name] = max(best[name], count / _cli_seconds(folders, workers, tree))
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
    """Ours (hash-only decode) over ``paths`` in a pool of ``workers`` processes."""
    chunk = max(1, len(paths) // (workers * 16))
    warm = list(paths[: workers * 8])
    rates = []
    # Worker CPU is only visible once the workers have exited (RUSAGE_CHILDREN).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_ours_hashes_only, warm, chunksize=1))  # start and warm the workers
        for _ in range(repeat):
            start = time.perf_counter()
            list(pool.map(_ours_hashes_only, paths, chunksize=chunk))
            rates.append(len(paths) / (time.perf_counter() - start))
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    images = len(warm) + repeat * len(paths)
    return PoolRate(max(rates), cpu / images, cpu / wall)


def _cpu_with_children() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _imagededup_rate(folder: Path, count: int, workers: int | None = 0) -> Rate:
    """imagededup PHash over ``folder``; ``workers=None``: its default (one per CPU)."""
    from imagededup.methods import PHash

    hasher = PHash(verbose=False)
    # num_enc_workers=0 still hashes in a one-process multiprocessing.Pool: count the
    # CPU time of that (joined) child too.
    kwargs = {} if workers is None else {"num_enc_workers": workers}
    wall, cpu = time.perf_counter(), _cpu_with_children()
    encodings = hasher.encode_images(image_dir=str(folder), **kwargs)
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
    parser.add_argument(
        "--cli-copies",
        type=int,
        default=3,
        help="also time one process indexing the folder this many times over (symlinked "
        "copies, separate shards): the fixed start-up cost spread over more images",
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="a checkout (e.g. `git worktree add --detach /tmp/base v0.2.0`) whose CLI is run "
        "in the same rounds, for before/after ratios",
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
    ours_embed = _best_rate(_ours, paths, args.repeat)
    ours = _best_rate(_ours_hashes_only, paths, args.repeat)
    pool2 = _pool_rate(paths, 2, args.repeat)
    dedup = dedup_default = None
    if not args.skip_imagededup:
        dedup = _imagededup_rate(folder, len(paths))
        dedup_default = _imagededup_rate(folder, len(paths), workers=None)
    cli = cli_copies = None
    if not args.skip_cli:
        cli = _cli_rates([folder], len(paths), args.cli_rounds, args.baseline_tree)
        if args.cli_copies > 1:
            # Hard links in separate folders: other paths, so separate shards and items (a
            # symlinked folder resolves to the same source and would be skipped as indexed).
            with tempfile.TemporaryDirectory(prefix="copies-", dir=folder.parent) as tmp:
                copies = [Path(tmp) / f"copy{i}" for i in range(args.cli_copies)]
                for copy in copies:
                    copy.mkdir()
                    for path in paths:
                        os.link(path, copy / path.name)
                cli_copies = _cli_rates(
                    copies, len(paths) * len(copies), args.cli_rounds, args.baseline_tree
                )

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average after the run: {load} (on {os.cpu_count()} cpus)")
    print(f"decode floor, 256 request       {floor}")
    print(f"decode floor, smallest scale    {smallest}")
    print(f"ours, embedding decode          {ours_embed}")
    print(f"ours, hash-only decode          {ours}")
    print(
        f"ours, 2-process pool            {pool2.wall:8.1f} img/s wall  "
        f"(workers got {pool2.cores:.2f} cores; {pool2.cpu_per_image * 1e3:.2f} ms CPU/image "
        f"vs {1e3 / ours.cpu:.2f} ms in-process)"
    )
    if dedup is not None and dedup_default is not None:
        print(f"imagededup PHash, 1 worker      {dedup}")
        print(f"imagededup PHash, default       {dedup_default.wall:8.1f} img/s wall")
    print("ratios, wall / cpu:")
    print(
        f"  hash-only / embedding decode  {ours.wall / ours_embed.wall:6.2f}x / "
        f"{ours.cpu / ours_embed.cpu:5.2f}x  (decode at need)"
    )
    print(
        f"  ours / smallest-scale floor   {ours.wall / smallest.wall:6.1%} / {ours.cpu / smallest.cpu:5.1%}"
    )
    if dedup is not None:
        print(
            f"  ours / imagededup             {ours.wall / dedup.wall:6.2f}x / "
            f"{ours.cpu / dedup.cpu:5.2f}x  (one process each)"
        )
        print(
            f"  smallest floor / imagededup   {smallest.wall / dedup.wall:6.2f}x / "
            f"{smallest.cpu / dedup.cpu:5.2f}x  (the ceiling for one process)"
        )
    print(f"  2-process pool / 1            {pool2.wall / ours.wall:6.2f}x wall")
    projected = 2 / (pool2.cpu_per_image * ours.cpu)
    print(
        f"  2-process pool / 1            {projected:6.2f}x with 2 free cores (projected from "
        "CPU/image; equals the wall ratio on an idle machine)"
    )
    if cli is None:
        return
    _print_cli(cli, len(paths), smallest, dedup, dedup_default)
    if cli_copies is not None:
        _print_cli(cli_copies, len(paths) * args.cli_copies, smallest, dedup, dedup_default)


def _print_cli(
    cli: dict[str, float],
    count: int,
    smallest: Rate,
    dedup: Rate | None,
    dedup_default: Rate | None,
) -> None:
    print(
        f"whole process `splitaudit index --no-embed`, {count} images (img/s wall, best of rounds):"
    )
    for name, rate in cli.items():
        print(f"  --workers {name:<12} {rate:7.1f}")
    print(f"  --workers 2 / 1               {cli['2'] / cli['1']:6.2f}x  (>= 1.8x)")
    print(f"  --workers 1 / smallest floor  {cli['1'] / smallest.wall:6.1%}  (>= 80%)")
    if dedup is not None and dedup_default is not None:
        print(f"  --workers 1 / imagededup 1    {cli['1'] / dedup.wall:6.2f}x  (>= 5x)")
        print(f"  --workers 2 / imagededup 1    {cli['2'] / dedup.wall:6.2f}x")
        print(
            f"  --workers auto / imagededup default {cli['auto'] / dedup_default.wall:6.2f}x "
            "(each tool's default)"
        )
    if "baseline 1" in cli:
        print(f"  --workers 1 / baseline        {cli['1'] / cli['baseline 1']:6.2f}x")
        print(f"  --workers 2 / baseline        {cli['2'] / cli['baseline 2']:6.2f}x")


if __name__ == "__main__":
    main()
