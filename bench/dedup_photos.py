"""Photo dedup, side by side: splitaudit dedup, imagededup PHash ``find_duplicates``, fastdup components.

Run: ``.venv/bin/python -m bench.dedup_photos [--originals 5000] [--dir bench/.cache/dedup/photos]``

Originals: non-overlapping ``TILE`` px tiles of the offline real photos
(``bench.accuracy.photos``), textured ones only (grey std >= ``MIN_STD``: flat sky tiles are
all alike), upscaled to ``SIDE`` px; tiles of one photo are look-alike negatives (same light,
palette, camera, texture). Only when the photos run out, photo-like synthetic images
(``splitaudit.indexer.demo.synthetic_photo``) fill up to the requested count (the table says
how many). Half of the originals get 1-3 planted copies: downscale to half size, JPEG quality
30, horizontal flip, 4 px black border; 5,000 originals make ~10,000 files.

Every tool sees the same folder and runs as its own process, timed from outside (wall, CPU
seconds of the process and its children, peak RSS): splitaudit from .venv (``index`` with the
bundled efficientnet-lite0, and ``--no-embed``, then ``dedup``), imagededup from
``BENCH_PYTHON`` (/work/bench-venv) and fastdup from ``FASTDUP_PYTHON`` (/work/fastdup-venv),
never from .venv. Times include each tool's own decoding and hashing / embedding. Each tool's
duplicate groups are closed into clusters (connected components) and scored as pairs against
the planted clusters.

Also: how uniform real pHashes are. For every pair of originals (all unrelated by
construction) the pHash distance is counted against the binomial a uniform 64-bit hash would
give; the store-level bench's hashes are uniform, so its chance collisions are a lower bound.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

FASTDUP_PYTHON = Path("/work/fastdup-venv/bin/python")
BENCH_PYTHON = Path("/work/bench-venv/bin/python")
SPLITAUDIT = Path(sys.executable).parent / "splitaudit"
DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "dedup" / "photos"
COPY_SHARE = 0.5
TILE = 32  # px of the source photo per tile
SIDE = 256  # px the tile is upscaled to (half-size copies stay above the small-image side)
MIN_STD = 10.0
EDITS = ("half", "jpeg30", "flip", "border")
FASTDUP_SCRIPT = """
import json, sys
import fastdup
fd = fastdup.create(work_dir=sys.argv[2], input_dir=sys.argv[1])
fd.run(overwrite=True)
cc, _ = fd.connected_components()
groups = {}
for cid, name in zip(cc["component_id"], cc["filename"]):
    groups.setdefault(int(cid), []).append(name.rsplit("/", 1)[-1])
print(json.dumps({"groups": [g for g in groups.values() if len(g) > 1]}))
"""
IMAGEDEDUP_SCRIPT = """
import json, sys
from imagededup.methods import {method}
found = {method}(verbose=False).find_duplicates(image_dir=sys.argv[1], {args})
print(json.dumps({{"groups": [[k, *v] for k, v in found.items() if v]}}))
"""


def tile_boxes(width: int, height: int, side: int) -> list[tuple[int, int, int, int]]:
    """Non-overlapping ``side`` x ``side`` boxes covering a ``width`` x ``height`` image (edges dropped)."""
    return [
        (x, y, x + side, y + side)
        for y in range(0, height - side + 1, side)
        for x in range(0, width - side + 1, side)
    ]


def originals(n: int) -> tuple[list[Image.Image], int]:
    """``n`` originals: textured photo tiles first, then synthetic photos; and how many are real."""
    from bench.accuracy.photos import collect_photos
    from splitaudit.indexer.demo import synthetic_photo

    out: list[Image.Image] = []
    for photo in collect_photos():
        gray = np.asarray(photo.image.convert("L"), np.float32)
        for box in tile_boxes(photo.image.width, photo.image.height, TILE):
            if gray[box[1] : box[3], box[0] : box[2]].std() < MIN_STD:
                continue
            out.append(photo.image.crop(box).resize((SIDE, SIDE), Image.Resampling.BICUBIC))
            if len(out) == n:
                return out, n
    real = len(out)
    seed = 10_000
    while len(out) < n:
        out.append(synthetic_photo(seed, (288, 216)))
        seed += 1
    return out, real


def _edit(image: Image.Image, edit: str, path: Path) -> None:
    if edit == "half":
        image.resize((image.width // 2, image.height // 2), Image.Resampling.LANCZOS).save(
            path, quality=90
        )
    elif edit == "jpeg30":
        image.save(path, quality=30)
    elif edit == "flip":
        ImageOps.mirror(image).save(path, quality=90)
    else:
        ImageOps.expand(image, border=4, fill=(0, 0, 0)).save(path, quality=90)


def make_folder(folder: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """Write the originals and planted copies; return the planted clusters (file names), how
    many originals are real photo tiles, and the originals' pHashes."""
    from splitaudit.indexer.features.perceptual import phash

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    clusters: list[set[str]] = []
    images, real = originals(n)
    hashes = []
    for i, image in enumerate(images):
        name = f"img{i:05d}.jpg"
        rgb = image.convert("RGB")
        rgb.save(folder / name, quality=92)
        hashes.append(phash(rgb).value & (2**64 - 1))
        if rng.random() < COPY_SHARE:
            group = {name}
            for edit in rng.choice(EDITS, int(rng.integers(1, 4)), replace=False).tolist():
                copy = f"img{i:05d}_{edit}.jpg"
                _edit(rgb, edit, folder / copy)
                group.add(copy)
            clusters.append(group)
    return {"clusters": clusters, "real": real, "hashes": np.asarray(hashes, np.uint64)}


def phash_spread(hashes: np.ndarray, upto: int = 8) -> dict[str, Any]:
    """Pairs of unrelated originals within ``r`` bits, r <= ``upto``, against a uniform hash."""
    n = len(hashes)
    counts = np.zeros(65, np.int64)
    for start in range(0, n, 512):
        block = hashes[start : start + 512]
        d = np.bitwise_count(block[:, None] ^ hashes[None, :]).astype(np.int64)
        rows = np.arange(start, start + len(block))[:, None]
        counts += np.bincount(d[rows < np.arange(n)[None, :]], minlength=65)
    pairs = n * (n - 1) // 2
    out: dict[str, Any] = {"originals": n, "pairs": pairs, "median_bits": None, "within": {}}
    cum = np.cumsum(counts)
    out["median_bits"] = int(np.searchsorted(cum, pairs / 2))
    for r in (4, 6, upto):
        uniform = pairs * sum(comb(64, k) for k in range(r + 1)) / 2**64
        out["within"][r] = {"real": int(cum[r]), "uniform_expected": float(f"{uniform:.3g}")}
    return out


GNU_TIME = Path("/usr/bin/time")


def _process(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    """Run one tool's process to the end: wall, CPU seconds (user + system, with the children it
    waited for), peak RSS, exit code, output.

    Linux keeps a process's peak RSS across ``exec``: a tool forked from this process (which
    holds the originals and hashes, ~1.5 GiB at 5,000 originals) would report at least this
    process's size. So the tool is started by GNU time (``/usr/bin/time``, a small process),
    whose report of its child's own peak is the figure; without it, the wait4 figure is
    kept and may be that floor."""
    t = time.perf_counter()
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        timed = [GNU_TIME, "-f", "%M", "-o", peak.name, *cmd] if GNU_TIME.exists() else cmd
        proc = subprocess.Popen(timed, stdout=out, stderr=err, env=env, cwd=cwd)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        reported = peak.read().split()
        kib = int(reported[-1]) if reported and reported[-1].isdigit() else usage.ru_maxrss
        return {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": kib / 1024,
            "rc": proc.returncode,
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


def _pairs(groups: list[list[str]] | list[set[str]]) -> set[tuple[str, str]]:
    """All pairs inside the connected components of the given groups."""
    from splitaudit.indexer.dedup.unionfind import UnionFind

    names: dict[str, int] = {}
    uf = UnionFind()
    for g in groups:
        ids = [names.setdefault(x, len(names)) for x in g]
        for other in ids[1:]:
            uf.union(ids[0], other)
    inverse = {v: k for k, v in names.items()}
    return {
        tuple(sorted((inverse[a], inverse[b])))
        for comp in uf.groups()  # type: ignore[misc]
        for x, a in enumerate(comp)
        for b in comp[x + 1 :]
    }


def _planted(folder: Path) -> list[set[str]]:
    """The planted clusters of a folder ``make_folder`` wrote, from the file names."""
    groups: dict[str, set[str]] = {}
    for path in folder.iterdir():
        groups.setdefault(path.stem.split("_")[0], set()).add(path.name)
    return [g for g in groups.values() if len(g) > 1]


def _score(name: str, run: dict[str, Any], truth: set[tuple[str, str]]) -> dict[str, Any]:
    found = _pairs(run["groups"])
    hits = len(found & truth)
    return {
        "tool": name,
        "wall_s": round(run["wall_s"], 1),
        "cpu_s": round(run["cpu_s"], 1),
        "peak_rss_mb": round(run["peak_rss_mb"]),
        "found_pairs": len(found),
        "pair_precision": round(hits / len(found), 4) if found else 1.0,
        "pair_recall": round(hits / len(truth), 4) if truth else 1.0,
    }


def _ours(folder: Path, embed: bool) -> dict[str, Any] | str:
    """``splitaudit index`` then ``splitaudit dedup``, each its own process, times added."""
    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as home:
        model = ["--model", "efficientnet-lite0"] if embed else ["--no-embed"]
        report = Path(home) / "clusters.json"
        steps = [
            [
                str(SPLITAUDIT),
                "index",
                str(folder),
                "--corpus",
                "photos",
                "--home",
                home,
                "-q",
                *model,
            ],
            [
                str(SPLITAUDIT),
                "dedup",
                "--corpus",
                "photos",
                "--home",
                home,
                "-q",
                "--json",
                str(report),
            ],
        ]
        runs = [_process(step) for step in steps]
        failed = next((r for r in runs if r["rc"] != 0), None)
        if failed is not None:
            return f"failed: {failed['stderr'][-1500:]}"
        clusters = json.loads(report.read_text())["clusters"]
    return {
        "wall_s": sum(r["wall_s"] for r in runs),
        "cpu_s": sum(r["cpu_s"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "groups": [[m["key"] for m in c["members"]] for c in clusters],
    }


def _peer(python: Path, script: str, folder: Path, *extra: str) -> dict[str, Any] | str:
    """A peer tool in its own venv (never .venv), as a subprocess printing its groups as JSON."""
    if not python.exists():
        return f"not installed: {python}"
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as work:
        env = {**os.environ, "SENTRY_OPT_OUT": "1", "PYTHONPATH": ""}
        run = _process(
            [str(python), "-c", script, str(folder), work, *extra], env=env, cwd=Path(work)
        )
    if run["rc"] != 0:
        return f"failed: {run['stderr'][-1500:]}"
    return {**run, "groups": json.loads(run["stdout"].strip().splitlines()[-1])["groups"]}


TOOLS = {
    "splitaudit (efficientnet-lite0 + hashes + verification)": lambda f: _ours(f, embed=True),
    "splitaudit --no-embed (hashes + verification)": lambda f: _ours(f, embed=False),
    "imagededup PHash, max distance 10": lambda f: _peer(
        BENCH_PYTHON,
        IMAGEDEDUP_SCRIPT.format(method="PHash", args="max_distance_threshold=10"),
        f,
    ),
    "imagededup CNN, min similarity 0.9": lambda f: _peer(
        BENCH_PYTHON,
        IMAGEDEDUP_SCRIPT.format(method="CNN", args="min_similarity_threshold=0.9"),
        f,
    ),
    "fastdup connected components (default)": lambda f: _peer(FASTDUP_PYTHON, FASTDUP_SCRIPT, f),
}


def reuse_folder(folder: Path) -> dict[str, Any]:
    """What ``make_folder`` returned, read back from a folder it wrote (to run more tools on it)."""
    from splitaudit.indexer.features.perceptual import phash

    names = sorted(p.name for p in folder.iterdir() if "_" not in p.stem)
    hashes = [phash(Image.open(folder / n).convert("RGB")).value & (2**64 - 1) for n in names]
    return {"clusters": _planted(folder), "real": None, "hashes": np.asarray(hashes, np.uint64)}


def compare(
    n: int, root: Path, tools: list[str] | None = None, *, reuse: bool = False
) -> dict[str, Any]:
    """Build the folder of ``n`` originals (+ copies), run each tool, print and return the table."""
    folder = root / "images"
    made = reuse_folder(folder) if reuse and folder.exists() else make_folder(folder, n)
    clusters = made["clusters"]
    truth = _pairs(clusters)
    files = sum(1 for _ in folder.iterdir())
    spread = phash_spread(made["hashes"])
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for name, run in TOOLS.items():
        if tools and not any(t in name for t in tools):
            continue
        result = run(folder)
        if isinstance(result, str):
            skipped[name] = result
            print(f"{name}: {result}", file=sys.stderr)
            continue
        rows.append(_score(name, result, truth))
        print(json.dumps(rows[-1]), flush=True)
    print(
        f"\nphotos: {n} originals ({made['real']} real photo tiles), {len(clusters)} planted"
        f" clusters, {files} files, {len(truth)} true pairs"
    )
    print(
        f"{'tool':<58} {'wall s':>7} {'CPU s':>7} {'RSS MiB':>8} {'pairs':>6} {'precision':>9}"
        f" {'recall':>7}"
    )
    for r in rows:
        print(
            f"{r['tool']:<58} {r['wall_s']:>7} {r['cpu_s']:>7} {r['peak_rss_mb']:>8}"
            f" {r['found_pairs']:>6} {r['pair_precision']:>9} {r['pair_recall']:>7}"
        )
    for name, why in skipped.items():
        print(f"{name}: {why.splitlines()[0] if why else ''}")
    print(f"pHash spread of the unrelated originals: {spread}")
    return {
        "originals": n,
        "real_tiles": made["real"],
        "files": files,
        "planted_clusters": len(clusters),
        "true_pairs": len(truth),
        "phash_spread": spread,
        "tools": rows,
        "skipped": skipped,
    }


def witness_check(
    folder: Path, clusters: list[set[str]], model: str = "efficientnet-lite0"
) -> dict[str, Any]:
    """The second-witness rule (``dedup.pairs.needs_witness``) on these files: every pair within
    the near pHash radius (plain or mirrored stand-in, as dedup searches), split into planted and
    unrelated, and for those beyond ``WITNESS_HAMMING`` bits the embedding cosine against
    ``candidate_cosine``: planted pairs the rule would lose, unrelated ones it removes."""
    from splitaudit.indexer.dedup.pairs import MIRROR_MASK, WITNESS_HAMMING
    from splitaudit.indexer.embed.loader import load_embedder
    from splitaudit.indexer.features.perceptual import phash
    from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS

    th = DEFAULT_THRESHOLDS
    names = sorted(x.name for x in folder.iterdir())
    hashes = np.asarray(
        [phash(Image.open(folder / n).convert("RGB")).value & (2**64 - 1) for n in names],
        np.uint64,
    )
    truth = _pairs(clusters)
    near: dict[tuple[int, int], int] = {}
    for start in range(0, len(names), 512):
        block = hashes[start : start + 512]
        d = np.minimum(
            np.bitwise_count(block[:, None] ^ hashes[None, :]),
            np.bitwise_count((block[:, None] ^ MIRROR_MASK) ^ hashes[None, :]),
        )
        for r, c in zip(*np.nonzero(d <= th.phash_hamming), strict=True):
            a, b = start + int(r), int(c)
            if a < b:
                near[(a, b)] = int(d[r, c])
    far = [pair for pair, dist in near.items() if dist > WITNESS_HAMMING]
    wanted = sorted({i for pair in far for i in pair})
    embedder = load_embedder(model, allow_download=False)
    vecs = embedder.embed([Image.open(folder / names[i]).convert("RGB") for i in wanted])
    row = {i: n for n, i in enumerate(wanted)}
    out: dict[str, Any] = {"files": len(names), "candidate_cosine": th.candidate_cosine}
    for label, planted in (("planted", True), ("unrelated", False)):
        pairs = [p for p in near if ((names[p[0]], names[p[1]]) in truth) == planted]
        beyond = [p for p in pairs if near[p] > WITNESS_HAMMING]
        cos = [float(vecs[row[a]] @ vecs[row[b]]) for a, b in beyond]
        out[label] = {
            "within_radius": len(pairs),
            "beyond_witness_hamming": len(beyond),
            "cosine_below_candidate": sum(c < th.candidate_cosine for c in cos),
            "cosine_min": round(min(cos), 3) if cos else None,
            "cosine_median": round(float(np.median(cos)), 3) if cos else None,
        }
    print(f"second witness on {folder}: {out}")
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and optionally write the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--originals", type=int, default=5000)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--tools", default="", help="comma-separated name fragments (default: all)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--reuse", action="store_true", help="run on the folder already in --dir")
    ap.add_argument(
        "--witness-only", action="store_true", help="only the second-witness check (folder kept)"
    )
    args = ap.parse_args(argv)
    if args.witness_only:
        folder = args.dir / "images"
        made = make_folder(folder, args.originals) if not folder.exists() else None
        clusters = made["clusters"] if made else _planted(folder)
        out = witness_check(folder, clusters)
        if args.json:
            args.json.write_text(json.dumps(out, indent=2, default=str))
        return
    tools = [t for t in args.tools.split(",") if t] or None
    out = compare(args.originals, args.dir, tools, reuse=args.reuse)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
