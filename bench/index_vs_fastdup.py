"""``python -m bench.index_vs_fastdup``: whole-process indexing beside fastdup, on the same files.

Issue 24 asks that ``splitaudit index --model efficientnet-lite0`` (the bundled model, OpenVINO,
export cached as every run after the first finds it) be at least as fast as fastdup on the same
files, in CPU seconds and wall time, with a peak RSS of at most 400 MiB. Each round runs, one
after the other on the same folder, each in a fresh home (export pre-built):

- ``splitaudit``: this checkout with its defaults;
- ``splitaudit, before`` (with ``--before PATH``): another checkout of the library (e.g.
  ``git worktree add /tmp/before <commit>``) run through this install's editable finder,
  remapped: the baseline, in the same run; without ``--before``, ``splitaudit, batch 32``: this
  code with 0.4.0's forward batch and OpenVINO stream split (32 images, at least 8 per stream)
  patched in at start-up;
- ``fastdup``: fastdup's own run (``/work/fastdup-venv``, bundled model, ``SENTRY_OPT_OUT=1``).

For each: wall seconds, CPU seconds (user + system of the process and the workers it reaped,
from ``wait4``), the peak RSS of the largest process, and the peak of the whole process tree's
memory, summed as PSS (sampled every 0.2 s: splitaudit's decode workers are forked, and PSS
counts the pages they share with the main process once). Image sets: ``photos`` (the offline bench
photos, ~876x502 JPEGs) and ``small`` (the same photos at <= 500 px, ImageNet-like). Rounds
alternate the tools so machine noise hits them alike; medians are printed with the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from bench.photos import make_photo_corpus

CACHE = Path(__file__).resolve().parent / ".cache"
FASTDUP_PYTHON = Path("/work/fastdup-venv/bin/python")
FASTDUP_SCRIPT = """
import sys, fastdup
fd = fastdup.create(work_dir=sys.argv[2], input_dir=sys.argv[1])
fd.run(verbose=False, overwrite=True)
"""
# 0.4.0's CPU forward batch and OpenVINO stream split, patched into this code (the baseline).
BATCH_32 = (
    "import splitaudit.indexer.embed.device as d, splitaudit.indexer.embed.backends.openvino as o\n"
    "d.cpu_embed_batch = lambda threads=None: 32\n"
    "o.MIN_STREAM_BATCH = 8\n"
    "from splitaudit.indexer.cli.main import main\n"
    "main()\n"
)
# Another checkout of the library through this install's editable finder (bench.recall does the
# same): the finder's mapping is pointed at the checkout's folders before anything is imported.
BEFORE = (
    "import pkgutil, importlib, sys\n"
    "root = sys.argv.pop(1)\n"
    "name = sorted(m.name for m in pkgutil.iter_modules()\n"
    "    if m.name.startswith('__editable___splitaudit_') and m.name.endswith('_finder'))[-1]\n"
    "importlib.import_module(name).MAPPING.update({'splitaudit': root + '/indexer/public',\n"
    "    'splitaudit.app': root + '/app', 'splitaudit.indexer': root + '/indexer'})\n"
    "from splitaudit.indexer.cli.main import main\n"
    "main()\n"
)
# Runs the command, samples the tree's summed PSS, reports wait4's CPU and peak RSS.
LAUNCHER = r"""
import os, subprocess, sys, time, threading
out, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
peak_sum = 0
def tree_pss(root):
    kids = {}
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                with open(f'/proc/{pid}/stat') as f:
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(pid))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:  # proportional set size: pages shared with forked workers counted once
            with open(f'/proc/{pid}/smaps_rollup') as f:
                total += next(int(l.split()[1]) for l in f if l.startswith('Pss:'))
        except (OSError, StopIteration):
            pass
    return total
def sample():
    global peak_sum
    while p.poll() is None:
        peak_sum = max(peak_sum, tree_pss(p.pid))
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
_, status, usage = os.wait4(p.pid, 0)
open(out, 'w').write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss} {peak_sum}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def image_sets(n: int) -> dict[str, Path]:
    """The two folders of ``n`` JPEGs: the bench photos, and the same at <= 500 px."""
    photos = make_photo_corpus(CACHE / "photos" / f"n{n}-s0", n=n, seed=0)
    small = CACHE / "photos" / f"n{n}-s0-500px"
    if len(list(small.glob("*.jpg"))) != n:
        small.mkdir(parents=True, exist_ok=True)
        for path in photos:
            with Image.open(path) as im:
                im = im.convert("RGB")
                im.thumbnail((500, 500))
                im.save(small / path.name, quality=90)
    return {"photos": photos[0].parent, "small": small}


def measured(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall, CPU seconds, largest process's peak RSS and whole tree's peak PSS (MiB) of ``cmd``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "usage"
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(out), *cmd],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{cmd[:4]} failed: {done.stderr[-800:]}")
        cpu, maxrss, tree = out.read_text().split()
    return {"wall": wall, "cpu": float(cpu), "rss": int(maxrss) / 1024, "tree": int(tree) / 1024}


def splitaudit_cmd(
    folder: Path, home: Path, corpus: str, *, tool: str, before: Path | None
) -> list[str]:
    args = ["index", str(folder), "--corpus", corpus, "--home", str(home)]
    args += ["--model", "efficientnet-lite0", "--backend", "openvino"]
    if tool == "splitaudit, before":
        return [sys.executable, "-c", BEFORE, str(before), *args]
    if tool == "splitaudit, batch 32":
        return [sys.executable, "-c", BATCH_32, *args]
    return [sys.executable, "-m", "splitaudit.indexer.cli", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sets", default="small,photos")
    parser.add_argument(
        "--before", type=Path, help="another checkout to index with, as the baseline"
    )
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SENTRY_OPT_OUT": "1"}
    env.pop("SPLITAUDIT_BACKEND", None)
    folders = image_sets(args.n)
    baseline = "splitaudit, batch 32" if args.before is None else "splitaudit, before"
    tools = ["splitaudit", baseline]
    if FASTDUP_PYTHON.is_file():
        tools.append("fastdup")
    else:
        print(f"(fastdup not measured: no {FASTDUP_PYTHON})")
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        work = Path(tmp)
        warm = work / "warm"
        warm.mkdir()
        for name in args.sets.split(","):
            folder = folders[name]
            (warm / "0.jpg").write_bytes(next(folder.glob("*.jpg")).read_bytes())
            runs: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
            for r in range(args.rounds):
                for tool in tools if r % 2 == 0 else tools[::-1]:
                    home = work / f"{name}-{r}-{tool.replace(' ', '').replace(',', '')}"
                    if tool == "fastdup":
                        cmd = [str(FASTDUP_PYTHON), "-c", FASTDUP_SCRIPT, str(folder), str(home)]
                    else:
                        # the export is built by a first one-image run, as a second run finds it
                        subprocess.run(
                            splitaudit_cmd(warm, home, "warm", tool=tool, before=args.before),
                            env=env,
                            check=True,
                            capture_output=True,
                        )
                        cmd = splitaudit_cmd(folder, home, "c", tool=tool, before=args.before)
                    runs[tool].append(measured(cmd, env))
            print(f"\n{name}: {args.n} JPEGs from {folder}, {args.rounds} rounds (medians)")
            print(
                f"  {'tool':<22}{'wall s':>8}{'CPU s':>8}{'img/CPU-s':>11}"
                f"{'peak RSS MiB':>14}{'tree PSS MiB':>14}"
            )
            med = {
                t: {k: statistics.median(run[k] for run in rs) for k in rs[0]}
                for t, rs in runs.items()
            }
            for tool, m in med.items():
                print(
                    f"  {tool:<22}{m['wall']:8.1f}{m['cpu']:8.1f}{args.n / m['cpu']:11.1f}"
                    f"{m['rss']:14.0f}{m['tree']:14.0f}"
                )
            if "fastdup" in med:
                ours, theirs = med["splitaudit"], med["fastdup"]
                print(
                    f"  splitaudit vs fastdup: {theirs['cpu'] / ours['cpu']:.2f}x its images per "
                    f"CPU-second, {theirs['wall'] / ours['wall']:.2f}x its images per second (wall)"
                )
            base, ours = med[baseline], med["splitaudit"]
            print(
                f"  vs {baseline.split(', ')[1]}: {base['cpu'] / ours['cpu']:.2f}x its images per "
                f"CPU-second, {base['wall'] / ours['wall']:.2f}x per second (wall), "
                f"peak RSS {ours['rss'] / base['rss']:.2f}x"
            )


if __name__ == "__main__":
    main()
