"""Photo dedup, side by side: splitaudit dedup, imagededup PHash ``find_duplicates``, fastdup components.

Originals: non-overlapping tiles of the offline real photos (``bench.accuracy.photos``; tiles of
one photo are look-alike negatives: same light, palette and camera), upscaled to ~256 px, then
photo-like synthetic images (``splitaudit.indexer.demo.synthetic_photo``) up to the requested count. A
fifth of the originals get 1-3 planted copies: downscale to half size, JPEG quality 30,
horizontal flip, 4 px black border. Every tool sees the same folder; each tool's duplicate
groups are closed into clusters (connected components) and scored as pairs against the
planted clusters. Times include each tool's own decoding and hashing / embedding.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

FASTDUP_PYTHON = Path("/work/fastdup-venv/bin/python")
COPY_SHARE = 0.2
EDITS = ("half", "jpeg30", "flip", "border")
FASTDUP_SCRIPT = """
import json, sys, time
import fastdup
t = time.perf_counter()
fd = fastdup.create(work_dir=sys.argv[2], input_dir=sys.argv[1])
fd.run(overwrite=True)
cc, _ = fd.connected_components()
groups = {}
for cid, name in zip(cc["component_id"], cc["filename"]):
    groups.setdefault(int(cid), []).append(name.rsplit("/", 1)[-1])
print(json.dumps({"seconds": time.perf_counter() - t, "groups": [g for g in groups.values() if len(g) > 1]}))
"""


def _originals(n: int) -> list[Image.Image]:
    from bench.accuracy.dataset import _tiles
    from bench.accuracy.photos import collect_photos
    from splitaudit.indexer.demo import synthetic_photo

    out: list[Image.Image] = []
    for photo in collect_photos():
        for box in _tiles(photo, 3):
            tile = photo.image.crop(tuple(round(v) for v in box))  # type: ignore[arg-type]
            scale = 256 / max(tile.size)
            out.append(
                tile.resize(
                    (round(tile.width * scale), round(tile.height * scale)),
                    Image.Resampling.BICUBIC,
                )
            )
    seed = 10_000
    while len(out) < n:
        out.append(synthetic_photo(seed, (288, 216)))
        seed += 1
    return out[:n]


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


def make_folder(folder: Path, n: int, seed: int = 0) -> list[set[str]]:
    """Write the originals and planted copies; return the planted clusters (file names)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    clusters: list[set[str]] = []
    for i, image in enumerate(_originals(n)):
        name = f"img{i:05d}.jpg"
        image.convert("RGB").save(folder / name, quality=92)
        if rng.random() < COPY_SHARE:
            group = {name}
            for edit in rng.choice(EDITS, int(rng.integers(1, 4)), replace=False).tolist():
                copy = f"img{i:05d}_{edit}.jpg"
                _edit(image.convert("RGB"), edit, folder / copy)
                group.add(copy)
            clusters.append(group)
    return clusters


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


def _score(
    name: str, seconds: float, found: set[tuple[str, str]], truth: set[tuple[str, str]]
) -> dict[str, Any]:
    hits = len(found & truth)
    return {
        "tool": name,
        "seconds": round(seconds, 1),
        "found_pairs": len(found),
        "pair_precision": round(hits / len(found), 4) if found else 1.0,
        "pair_recall": round(hits / len(truth), 4) if truth else 1.0,
    }


def _ours(folder: Path) -> tuple[float, list[list[str]]]:
    from splitaudit.indexer.dedup.outputs import dedup_report
    from splitaudit.indexer.dedup.service import create_dedup, run_dedup
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.folder import FolderSource
    from splitaudit.indexer.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as home:
        ws = Workspace.open(Path(home))
        t = time.perf_counter()
        index_sources(ws, "photos", [FolderSource(folder)], embedder=None)
        run_id = create_dedup(ws, corpus="photos")
        run_dedup(ws, run_id)
        seconds = time.perf_counter() - t
        with ws.sessions() as s:
            report = dedup_report(s, run_id)
        ws.close()
    return seconds, [[m["key"] for m in c["members"]] for c in report["clusters"]]


def _imagededup(folder: Path) -> tuple[float, list[list[str]]]:
    from imagededup.methods import PHash

    t = time.perf_counter()
    found = PHash(verbose=False).find_duplicates(image_dir=str(folder), max_distance_threshold=10)
    return time.perf_counter() - t, [[k, *v] for k, v in found.items() if v]


def _fastdup(folder: Path) -> tuple[float, list[list[str]]] | None:
    if not FASTDUP_PYTHON.exists():
        return None
    with tempfile.TemporaryDirectory(prefix="bench-fastdup-") as work:
        proc = subprocess.run(
            [str(FASTDUP_PYTHON), "-c", FASTDUP_SCRIPT, str(folder), work],
            capture_output=True,
            text=True,
            env={**os.environ, "SENTRY_OPT_OUT": "1", "PYTHONPATH": ""},
            check=False,
            cwd=work,
        )
    if proc.returncode != 0:
        print(f"fastdup failed: {proc.stderr[-2000:]}")
        return None
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(out["seconds"]), out["groups"]


def compare(n: int, root: Path) -> dict[str, Any]:
    """Build the folder of ``n`` originals (+ copies), run the three tools, print and return the table."""
    folder = root / "images"
    clusters = make_folder(folder, n)
    truth = _pairs(clusters)
    files = sum(1 for _ in folder.iterdir())
    rows = []
    for name, run in (
        ("splitaudit dedup (hashes + pixel verification)", _ours),
        ("imagededup PHash, max distance 10", _imagededup),
        ("fastdup connected components (default)", _fastdup),
    ):
        result = run(folder)
        if result is not None:
            rows.append(_score(name, result[0], _pairs(result[1]), truth))
    base = next((r["seconds"] for r in rows if r["tool"].startswith("imagededup")), None)
    print(
        f"\nphotos: {n} originals, {len(clusters)} planted clusters, {files} files, {len(truth)} true pairs"
    )
    print(
        f"{'tool':<50} {'s':>7} {'x imagededup':>13} {'pairs':>6} {'precision':>10} {'recall':>7}"
    )
    for r in rows:
        ratio = r["seconds"] / base if base else float("nan")
        print(
            f"{r['tool']:<50} {r['seconds']:>7} {ratio:>13.2f} {r['found_pairs']:>6} {r['pair_precision']:>10}"
            f" {r['pair_recall']:>7}"
        )
    return {
        "originals": n,
        "files": files,
        "planted_clusters": len(clusters),
        "true_pairs": len(truth),
        "tools": rows,
    }
