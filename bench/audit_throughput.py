"""Whole-process ``splitaudit audit`` throughput: backends, the 0.1.0 release and fastdup, one run.

Run: ``python -m bench.audit_throughput [--corpus-n 1000] [--split-n 400] [--rounds 2]
[--backend B ...] [--also-ref REF ...] [--skip-baseline] [--skip-fastdup]``

What one run does (issue 13: audit of a split with efficientnet-lite0 >= 2.5x the images/s of
the release before that issue's work, eager torch only):

- corpus: ``--corpus-n`` realistic JPEGs (``bench.photos``, 256-2400 px, cached under
  ``bench/.cache/photos``);
- split (``--split-n`` images, cached under ``bench/.cache/audit-split``): 60% edited copies of
  random corpus images (crop 60-90%, resize 25-50%, JPEG q20-40, rotation 5-15 degrees,
  mirror, colour, border, caption text, grayscale, crop + rotation), 20% fresh renditions of
  the same source photos (other crops: same scenes, not copies) and 20% synthetic unrelated
  photos;
- the corpus is indexed once per code (this checkout with ``--backend openvino``, which also
  builds the export cache; the baseline in its own home, since its schema differs), untimed;
- rounds: every audit variant once per round, the order rotated each round, each a fresh
  ``splitaudit -v audit SPLIT --corpus c --json FILE`` process: this checkout with
  ``--backend torch`` and ``--backend openvino``, each with its verification store
  (``HOME/cache/verify.sqlite``) emptied before the run (``store cold``: a first audit) and
  filled by an earlier audit of the split (``store warm``: a repeated one), the baseline
  (``--baseline-ref``, default ``9780ee4`` = 0.1.0, exported with ``git archive``) and any
  ``--also-ref`` (run with ``--backend openvino`` when its CLI has the option);
- fastdup 2.x (``/work/fastdup-venv``, bundled model, ``SENTRY_OPT_OUT=1``) cross-set run on the
  same files (``fastdup.run(input_dir=corpus, test_dir=split)``: it extracts features of both,
  it has no persistent index), once per round;
- printed: median wall seconds, split images/s, ratio to the baseline, peak RSS (``VmHWM`` of
  the child, sampled), the flagged count of each report and a fingerprint of its results
  (verdicts, matches, split duplicates: a speed-up must not change it), and
  this checkout's per-phase wall time as the audit logs it (``audit phases: ...``).

Figures depend on the machine's load: the load average is printed; only ratios measured in
the same run mean anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageOps

from bench.accuracy.throughput import export_ref
from bench.photos import make_photo_corpus
from splitaudit.indexer.demo import synthetic_photo

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
FASTDUP_PYTHON = Path("/work/fastdup-venv/bin/python")
SPLIT_VERSION = 1
_FASTDUP_SCRIPT = """
import sys, fastdup
fastdup.run(input_dir=sys.argv[1], work_dir=sys.argv[3], test_dir=sys.argv[2], verbose=False)
"""
_PHASES = re.compile(r"audit phases \(([\d.]+) s\): (.*)")
_PHASE = re.compile(r"(.+?) ([\d.]+) s(?:, |$)")
_GEOMETRY = re.compile(r"geometric verification: (\d+) pairs in ([\d.]+) s")


def _edit(image: Image.Image, kind: str, rng: np.random.Generator) -> Image.Image:
    """One edited copy of ``image`` (the edits a leaked test image typically carries)."""
    w, h = image.size
    if kind == "crop":
        f = float(rng.uniform(0.6, 0.9))
        cw, ch = int(w * f), int(h * f)
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        return image.crop((x, y, x + cw, y + ch))
    if kind == "resize":
        f = float(rng.uniform(0.25, 0.5))
        return image.resize((max(32, int(w * f)), max(32, int(h * f))), Image.Resampling.BILINEAR)
    if kind == "rotate":
        return image.rotate(float(rng.uniform(5, 15)) * rng.choice([-1, 1]), expand=False)
    if kind == "mirror":
        return ImageOps.mirror(image)
    if kind == "colour":
        gain = rng.uniform(0.7, 1.3, 3)
        pixels = np.asarray(image, np.float32) * gain
        return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    if kind == "border":
        pad = int(0.08 * min(w, h))
        return ImageOps.expand(
            image, border=pad, fill=tuple(int(c) for c in rng.integers(0, 256, 3))
        )
    if kind == "text":
        out = image.copy()
        draw = ImageDraw.Draw(out)
        for n in range(3):
            draw.text((w * 0.1, h * (0.2 + 0.25 * n)), f"leaked copy #{n}", fill=(255, 255, 0))
        return out
    if kind == "grayscale":
        return ImageOps.grayscale(image).convert("RGB")
    if kind == "crop_rotate":
        return _edit(_edit(image, "crop", rng), "rotate", rng)
    return image  # "jpeg": the re-encode below is the edit


EDITS = ("crop", "resize", "jpeg", "rotate", "mirror", "colour", "border", "text", "grayscale",
         "crop_rotate")  # fmt: skip


def make_split(corpus: list[Path], n: int, seed: int = 0) -> Path:
    """Write (or reuse) the split folder: edited copies, same-scene renditions, unrelated photos."""
    folder = CACHE / "audit-split" / f"v{SPLIT_VERSION}-c{len(corpus)}-n{n}-s{seed}"
    done = folder / ".complete"
    if done.is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng([seed, SPLIT_VERSION])
    copies, scenes = round(0.6 * n), round(0.2 * n)
    for i, pick in enumerate(rng.choice(len(corpus), copies, replace=False).tolist()):
        kind = EDITS[i % len(EDITS)]
        with Image.open(corpus[pick]) as im:
            edited = _edit(im.convert("RGB"), kind, rng)
        quality = int(rng.integers(20, 41)) if kind == "jpeg" else int(rng.integers(70, 95))
        edited.save(folder / f"copy-{i:04d}-{kind}.jpg", "JPEG", quality=quality)
    fresh = make_photo_corpus(CACHE / "photos" / f"n{scenes}-s{seed + 1}", n=scenes, seed=seed + 1)
    for i, path in enumerate(fresh):
        shutil.copyfile(path, folder / f"scene-{i:04d}.jpg")
    for i in range(n - copies - scenes):
        side = int(rng.integers(320, 1280))
        synthetic_photo(10_000 + i, (side, side * 3 // 4)).save(
            folder / f"unrelated-{i:04d}.jpg", "JPEG", quality=90
        )
    done.write_text("ok")
    return folder


@dataclass
class Runs:
    """Measurements of one variant over the rounds."""

    seconds: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    flagged: list[int | None] = field(default_factory=list)
    results: list[str | None] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)


def _peak_rss(pid: int, stop: threading.Event, out: list[float]) -> None:
    """Sample the child's ``VmHWM`` (its own peak, not the forking parent's) until it ends."""
    path = Path(f"/proc/{pid}/status")
    while not stop.is_set():
        try:
            for line in path.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]) / 1024)
        except OSError:
            return
        stop.wait(0.1)


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stderr) of one child process; raises on failure."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        peaks: list[float] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_peak_rss, args=(proc.pid, stop, peaks))
        sampler.start()
        code = proc.wait()
        wall = time.perf_counter() - started
        stop.set()
        sampler.join()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if code not in (0, 1):  # 1: the gate failed, which an audit of leaked copies should
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{stderr[-3000:]}")
    return wall, max(peaks, default=float("nan")), stderr


def _splitaudit(code: Path, home: Path) -> tuple[list[str], dict[str, str]]:
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "HF_HUB_OFFLINE": "1",
        "SPLITAUDIT_HOME": str(home),
    }
    env.pop("SPLITAUDIT_BACKEND", None)
    return [sys.executable, "-c", "from splitaudit.indexer.cli.main import main; main()", "-v"], env


def _has_backend_option(code: Path) -> bool:
    return (code / "indexer" / "cli" / "backend_option.py").is_file()


def _read_report(report: Path) -> tuple[int | None, str | None]:
    """The report's flagged count and a fingerprint of its results: every test image's verdict,
    its matches (corpus key, kind) and the within-split duplicate pairs (scores left out)."""
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        return None, None
    results = sorted(
        (
            item["key"],
            item["verdict"],
            sorted((m.get("corpus_key"), m["kind"]) for m in item.get("matches", [])),
        )
        for item in data.get("items", [])
    )
    dups = sorted((d["a"], d["b"], d["kind"]) for d in data.get("split_duplicates", []))
    digest = hashlib.sha256(json.dumps([results, dups]).encode()).hexdigest()[:12]
    return int(data["summary"]["flagged"]), digest


def _phase_table(logs: list[str]) -> list[str]:
    """Median seconds per phase over the runs' ``audit phases`` log lines."""
    per: dict[str, list[float]] = {}
    totals = []
    for text in logs:
        found = _PHASES.search(text)
        if not found:
            continue
        totals.append(float(found[1]))
        for name, seconds in _PHASE.findall(found[2]):
            per.setdefault(name, []).append(float(seconds))
    if not totals:
        return ["    (no phase log: this code does not time its phases)"]
    total = statistics.median(totals)
    rows = [f"    {'phase':<28} {'s':>7} {'share':>6}"]
    for name, values in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
        med = statistics.median(values)
        rows.append(f"    {name:<28} {med:7.1f} {med / total:6.0%}")
    rows.append(f"    {'total timed':<28} {total:7.1f}")
    geometry = [_GEOMETRY.search(t) for t in logs]
    pairs = [f"{m[1]} pairs in {m[2]} s" for m in geometry if m]
    if pairs:
        rows.append(f"    geometric step (engine log): {pairs[0]}")
    return rows


def main(argv: list[str] | None = None) -> None:
    """Build the corpus and split, run every variant in alternating rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus-n", type=int, default=1000)
    parser.add_argument("--split-n", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-ref", default="9780ee4", help="the 0.1.0 release by default")
    parser.add_argument("--also-ref", action="append", default=[], help="another code to time")
    parser.add_argument(
        "--backend",
        dest="backends",
        action="append",
        choices=("torch", "onnxruntime", "openvino"),
        help="this checkout's backends to time (repeatable; default: torch and openvino)",
    )
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--skip-fastdup", action="store_true")
    parser.add_argument("--work", type=Path, default=None, help="keep homes and reports here")
    args = parser.parse_args(argv)
    corpus = make_photo_corpus(CACHE / "photos" / f"n{args.corpus_n}-s0", n=args.corpus_n, seed=0)
    corpus_dir = corpus[0].parent
    split = make_split(corpus, args.split_n)
    n_split = sum(1 for p in split.iterdir() if p.suffix == ".jpg")
    print(f"corpus {len(corpus)} JPEGs ({corpus_dir}), split {n_split} JPEGs ({split})")
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench-audit-")
        work = Path(tmp.name)
    else:
        work = args.work
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    try:
        _bench(args, work, corpus_dir, split, n_split)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _bench(
    args: argparse.Namespace, work: Path, corpus_dir: Path, split: Path, n_split: int
) -> None:
    index_args = ["index", str(corpus_dir), "--corpus", "c", "--model", "efficientnet-lite0"]
    # name -> (code, home, extra audit args)
    variants: dict[str, tuple[Path, Path, list[str]]] = {}
    homes: dict[Path, Path] = {}  # code -> home indexed by that code

    def home_for(code: Path, label: str) -> Path:
        if code not in homes:
            home = work / f"home-{label}"
            cmd, env = _splitaudit(code, home)
            extra = ["--backend", "openvino"] if _has_backend_option(code) else []
            wall, rss, _ = _run([*cmd, *index_args, *extra], env, work)
            print(
                f"  indexed the corpus with {label}: {wall:.0f} s ({args.corpus_n / wall:.1f} img/s, peak RSS {rss:.0f} MiB)"
            )
            homes[code] = home
        return homes[code]

    ours = home_for(ROOT, "this-checkout")
    for backend in args.backends or ("torch", "openvino"):
        # cold: the verification store is emptied before each run (a first audit);
        # warm: it holds what an earlier audit of the split kept (a repeated audit)
        for store in ("cold", "warm"):
            variants[f"this checkout, --backend {backend}, store {store}"] = (
                ROOT,
                ours,
                ["--backend", backend],
            )
    if not args.skip_baseline:
        code = export_ref(args.baseline_ref, work / "code-baseline")
        variants[f"baseline {args.baseline_ref} (torch)"] = (code, home_for(code, "baseline"), [])
    for n, ref in enumerate(args.also_ref):
        code = export_ref(ref, work / f"code-also-{n}")
        extra = ["--backend", "openvino"] if _has_backend_option(code) else []
        # Its own index: an older ref cannot open a home this checkout migrated further.
        variants[f"{ref} ({extra[-1] if extra else 'torch'})"] = (
            code,
            home_for(code, f"also-{n}"),
            extra,
        )
    fastdup = not args.skip_fastdup and FASTDUP_PYTHON.is_file()
    if fastdup:
        variants["fastdup cross-set run"] = (FASTDUP_PYTHON, work, [])
    runs = {name: Runs() for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            code, home, extra = variants[name]
            out = work / f"run-{r}-{names.index(name)}"
            if name.startswith("fastdup"):
                env = {**os.environ, "SENTRY_OPT_OUT": "1"}
                cmd = [str(code), "-c", _FASTDUP_SCRIPT, str(corpus_dir), str(split), str(out)]
                wall, rss, err = _run(cmd, env, work)
                flagged, fingerprint = None, None
            else:
                cmd, env = _splitaudit(code, home)
                store_file = home / "cache" / "verify.sqlite"
                if name.endswith("store cold"):
                    for stale in store_file.parent.glob(store_file.name + "*"):
                        stale.unlink()
                elif name.endswith("store warm") and not store_file.is_file():
                    _run(  # untimed: fills the store as a first audit would
                        [*cmd, "audit", str(split), "--corpus", "c", "--json", str(out), *extra],
                        env,
                        work,
                    )
                report = out.with_suffix(".json")
                wall, rss, err = _run(
                    [*cmd, "audit", str(split), "--corpus", "c", "--json", str(report), *extra],
                    env,
                    work,
                )
                flagged, fingerprint = _read_report(report)
            runs[name].seconds.append(wall)
            runs[name].rss_mib.append(rss)
            runs[name].flagged.append(flagged)
            runs[name].results.append(fingerprint)
            runs[name].logs.append(err)
            print(f"  round {r + 1}: {name}: {wall:.1f} s", flush=True)
    base_name = next(
        (n for n in names if n.startswith("baseline")),
        next((n for n in names if not n.startswith(("this", "fastdup"))), names[0]),
    )
    base = statistics.median(runs[base_name].seconds)
    print(
        f"\n`splitaudit audit` of {n_split} images against {args.corpus_n} indexed images "
        f"(efficientnet-lite0), median of {args.rounds} alternating rounds, whole process wall time; "
        f"ratios (x ref) against {base_name}"
    )
    for name in names:
        med = statistics.median(runs[name].seconds)
        flagged = ", ".join("-" if f is None else str(f) for f in runs[name].flagged)
        results = ", ".join(sorted({r for r in runs[name].results if r})) or "-"
        print(
            f"  {name:<40} {med:7.1f} s {n_split / med:6.2f} img/s {base / med:5.2f}x ref  "
            f"peak RSS {max(runs[name].rss_mib):6.0f} MiB  flagged {flagged}  results {results}"
        )
    print(
        "  (results: fingerprint of verdicts, matches and split duplicates; equal = same results)"
    )
    if fastdup:
        print("  (fastdup extracts the corpus's features too in every run: it keeps no index)")
    for name in names:
        if name.startswith("this checkout"):
            print(f"\n  per-phase wall time, {name} (median over rounds):")
            print("\n".join(_phase_table(runs[name].logs)))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average after the run: {load} (on {os.cpu_count()} cpus)")


if __name__ == "__main__":
    main()
