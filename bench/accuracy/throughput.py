"""``python -m bench.accuracy.throughput``: audit time of a 1,000-image split, this code vs a baseline.

The accuracy benchmark's corpus (669 images) is indexed once with the bundled offline model;
a seeded sample of its edited queries (1,000 by default: full-size and low-res edits) is
audited twice, each run in its own process on the same index: once with the code of a
baseline git ref (exported with ``git archive``, e.g. the release before geometric
verification) and once with this checkout. Prints both wall times, their ratio, and the
geometric step's share of the matching time as the engine logs it.
Run ``python -m bench.accuracy`` first (it builds the images under ``bench/.cache``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np

from bench.accuracy.dataset import dataset_root, load_dataset

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "bench" / ".cache"
_GEOMETRY_LOG = re.compile(
    r"geometric verification: (\d+) pairs in ([\d.]+) s \((\d+)% of matching time\)"
)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy.throughput", description=__doc__
    )
    parser.add_argument(
        "--baseline-ref", required=True, help="git ref of the baseline code, e.g. the last release"
    )
    parser.add_argument("--items", type=int, default=1000, help="split size (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="benchmark draw (default: %(default)s)")
    parser.add_argument(
        "--cache", type=Path, default=CACHE, help="bench cache (default: bench/.cache)"
    )
    return parser.parse_args()


def export_ref(ref: str, dest: Path) -> Path:
    """The tree of ``ref`` (only ``indexer/``, ``app/``, ``migrations/``) under ``dest``."""
    blob = subprocess.run(
        ["git", "archive", ref, "indexer", "app", "migrations"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _run(code: Path, args: list[str], home: Path) -> tuple[float, str]:
    """Run ``splitaudit ARGS`` with ``code`` first on the path; wall seconds and stderr."""
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "HF_HUB_OFFLINE": "1",
        "SPLITAUDIT_HOME": str(home),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "from splitaudit.indexer.cli.main import main; main()", "-v", *args],
        env=env,
        cwd=home.parent,  # not the checkout: `python -c` puts the working folder first on the path
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(
            f"splitaudit {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return elapsed, done.stderr


def main() -> None:
    """Index the corpus, audit the split with both codes, print times and the geometric share."""
    args = _parse_args()
    dataset = load_dataset(dataset_root(args.cache, args.seed), args.seed)
    queries, corpus = dataset.select("query"), dataset.select("corpus")
    rng = np.random.default_rng(args.seed)
    picked = [
        queries[i]
        for i in sorted(rng.choice(len(queries), min(args.items, len(queries)), replace=False))
    ]
    with tempfile.TemporaryDirectory(prefix="splitaudit-throughput-") as tmp:
        work = Path(tmp)
        for folder, items in (("corpus/all", corpus), ("split", picked)):
            (work / folder).mkdir(parents=True)
            for item in items:
                shutil.copyfile(dataset.path(item), work / folder / Path(item.file).name)
        home = work / "home"
        baseline = export_ref(args.baseline_ref, work / "baseline")
        index_s, _ = _run(
            ROOT,
            ["index", str(work / "corpus"), "--corpus", "c", "--model", "efficientnet-lite0"],
            home,
        )
        print(f"indexed {len(corpus)} corpus images in {index_s:.0f} s")
        times = {}
        for name, code in ((f"baseline {args.baseline_ref}", baseline), ("this checkout", ROOT)):
            seconds, log = _run(code, ["audit", str(work / "split"), "--corpus", "c"], home)
            times[name] = seconds
            found = _GEOMETRY_LOG.search(log)
            geometry = (
                f"; geometric verification {found[1]} pairs in {found[2]} s ({found[3]}% of matching "
                f"time, {float(found[2]) / seconds:.0%} of the audit's wall time)"
                if found
                else ""
            )
            print(
                f"{name}: audit of {len(picked)} images in {seconds:.1f} s ({len(picked) / seconds:.1f} images/s){geometry}"
            )
        base, this = times.values()
        print(f"audit time ratio this / baseline = {this / base:.2f}x")


if __name__ == "__main__":
    main()
