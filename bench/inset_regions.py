"""``python -m bench.inset_regions``: the regions of large test images on web-sized pages
(issue 23): insets found, false positives and what the inset refits cost, before / after.

``bench.recall`` measures insets on a screenshot canvas against 384-px corpus photos; its other
large test images are under 400 px, so they get no regions and never reach the inset refits.
This bench holds what a web corpus holds at web size (960 x 720, every test image gets
regions, ``inset_candidates.INSET_MIN_SIDE``):

- corpus: half of the offline photos (``bench.accuracy.photos``), each plain and under each of
  the six shared overlays of ``bench.accuracy.overlays`` (tiled and centred watermarks, corner
  logo, caption bands, frame, window chrome);
- positives: each corpus photo inset at 30 / 50 / 70% of a screenshot-like canvas
  (``bench.accuracy.overlays.inset``), to be near its plain corpus copy;
- positives laid out as users' pages lay pictures out (``framed_regions``' cases): each corpus
  photo at 30% of a dark presentation slide (``slide-30``) and in one cell of a 3 x 3 collage
  with gutters whose other eight cells show held-out photos (``collage``; each cell ~0.3 of
  the side, the photo cut to the cell's shape around its centre, as collage tools fill one);
- negatives, to match nothing: the other half of the photos plain (``plain``), under each same
  overlay (``overlay``: a region can hold the watermark or frame alone), inset in the same
  canvas (``inset-unrelated``) and nine of them in a collage (``collage-unrelated``).

``--page-side N`` shows every test image with its shorter side at ``N`` px (aspect kept): the
same families at the sizes of web thumbnails and previews (a 640 x 360 page), under
``INSET_MIN_SIDE``, where only the pictures a page frames are cut out as regions
(``inset_candidates.FRAMES_MIN_SIDE``); the corpus stays at 960 x 720.

Each library (``--before PATH``: another checkout, e.g. ``git worktree add /tmp/before HEAD``)
indexes the corpus and audits the split through the CLI in its own subprocess, on the same
files; printed: near per family, the audit's CPU per test image and the seconds its inset
refits took (``verification: inset refit``, from the audit's phase log).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageOps

from bench.images import at_shorter_side
from bench.library import (
    add_audit_only_options,
    audit_in_subprocess,
    audit_only,
    cli_in_process,
)

CACHE = Path(__file__).resolve().parent / ".cache" / "inset_regions"
RECIPE = 3  # bump when the dataset recipe changes
WEB_SIZE = (960, 720)
FRACTIONS = (0.3, 0.5, 0.7)
GUTTER = 14  # px between a collage's cells (and around them)
REFIT_PHASE = "verification: inset refit"


@dataclass(frozen=True)
class Query:
    """One split image: its family and the corpus photo it shows (None: a negative); that
    photo's corpus images are its plain copy and its overlaid ones (all copies of it)."""

    key: str
    family: str
    target: str | None


def build(root: Path, seed: int, page_side: int | None = None) -> list[Query]:
    """Write ``root/corpus`` and ``root/split`` (deterministic for a seed); the split's labels.
    ``page_side``: every test image reduced to that shorter side (aspect kept)."""
    from bench.accuracy.overlays import OVERLAYS, fit_photo, inset
    from bench.accuracy.photos import collect_photos

    manifest = root / "queries.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text())
        same = data.get("recipe") == RECIPE and data.get("seed") == seed
        if same and data.get("page_side") == page_side:
            return [Query(**q) for q in data["queries"]]
    for stale in ("corpus", "split", "warmup"):
        shutil.rmtree(root / stale, ignore_errors=True)
    rng = np.random.default_rng(seed)
    photos = collect_photos()
    order = rng.permutation(len(photos))
    half = len(photos) // 2
    indexed = [photos[i] for i in sorted(order[:half])]
    held_out = [photos[i] for i in sorted(order[half:])]
    corpus, split = root / "corpus", root / "split"
    for folder in (corpus, split):
        folder.mkdir(parents=True, exist_ok=True)
    queries: list[Query] = []

    def add(image: Image.Image, family: str, target: str | None) -> None:
        key = f"{family}/{len(queries):04d}.png"
        (split / family).mkdir(exist_ok=True)
        if page_side is not None:
            image = at_shorter_side(image, page_side)
        image.convert("RGB").save(split / key)
        queries.append(Query(key, family, target))

    def web(image: Image.Image) -> Image.Image:
        return image.resize(WEB_SIZE, Image.Resampling.LANCZOS)

    placing = np.random.default_rng(seed + 7)
    for photo in indexed:
        plain = fit_photo(photo.image)
        web(plain).save(corpus / f"{photo.name}.png")
        for kind, draw in OVERLAYS.items():
            web(draw(plain)).save(corpus / f"{photo.name}-{kind}.png")
        for fraction in FRACTIONS:
            shot = inset(web(plain), fraction, placing)
            add(shot, f"inset-{round(100 * fraction)}", photo.name)
        add(slide(web(plain), 0.3, placing), "slide-30", photo.name)
        others = [held_out[i].image for i in placing.choice(len(held_out), 8, replace=False)]
        cell = int(placing.integers(0, 9))
        add(collage([*others[:cell], web(plain), *others[cell:]]), "collage", photo.name)
    for k, photo in enumerate(held_out):
        plain = fit_photo(photo.image)
        add(web(plain), "plain", None)
        for kind, draw in OVERLAYS.items():
            add(web(draw(plain)), f"overlay-{kind}", None)
        add(inset(web(plain), FRACTIONS[k % len(FRACTIONS)], placing), "inset-unrelated", None)
        others = [held_out[i].image for i in placing.choice(len(held_out), 9, replace=False)]
        add(collage(others), "collage-unrelated", None)
    (root / "warmup").mkdir(exist_ok=True)
    fit_photo(held_out[0].image).resize((64, 48)).save(root / "warmup" / "w.png")
    manifest.write_text(
        json.dumps(
            {
                "recipe": RECIPE,
                "seed": seed,
                "page_side": page_side,
                "queries": [asdict(q) for q in queries],
            }
        )
    )
    return queries


def slide(photo: Image.Image, fraction: float, rng: np.random.Generator) -> Image.Image:
    """A dark presentation slide (title bar, bullet lines) showing ``photo`` fitted in
    ``fraction`` of its width and height, at a random place right of the bullets."""
    w, h = WEB_SIZE
    canvas = Image.new("RGB", WEB_SIZE, (24, 36, 64))
    draw = ImageDraw.Draw(canvas)
    draw.rectangle((0, 0, w, 90), fill=(200, 90, 40))
    for k in range(7):
        y = 140 + 76 * k
        draw.ellipse((40, y, 54, y + 14), fill=(230, 230, 230))
        draw.rectangle((72, y + 2, 72 + 50 * (3 + k % 4), y + 12), fill=(210, 214, 220))
    scale = min(fraction * w / photo.width, fraction * h / photo.height)
    size = (round(photo.width * scale), round(photo.height * scale))
    x = int(rng.integers(w // 2 - 40, w - size[0] - 20))
    y = int(rng.integers(110, h - size[1] - 20))
    canvas.paste(photo.resize(size, Image.Resampling.LANCZOS), (x, y))
    return canvas


def collage(photos: list[Image.Image]) -> Image.Image:
    """Nine photos in a 3 x 3 grid on white with ``GUTTER`` px gutters, each cut to its cell's
    shape around its centre."""
    w, h = WEB_SIZE
    cw, ch = (w - 4 * GUTTER) // 3, (h - 4 * GUTTER) // 3
    canvas = Image.new("RGB", WEB_SIZE, (255, 255, 255))
    for k, photo in enumerate(photos):
        cell = ImageOps.fit(photo.convert("RGB"), (cw, ch), Image.Resampling.LANCZOS)
        canvas.paste(cell, (GUTTER + (k % 3) * (cw + GUTTER), GUTTER + (k // 3) * (ch + GUTTER)))
    return canvas


class _PhaseLog(logging.Handler):
    """Keeps the audit's phase summary (``PhaseTimes.log``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("audit phases"):
            self.lines.append(message)


def run_audit(root: Path, home: Path) -> dict[str, Any]:
    """Index ``root/corpus`` and audit ``root/split`` into a fresh ``home``: report and costs."""
    if home.exists():
        shutil.rmtree(home)
    common = ("--corpus", "web", "--home", str(home))
    cli_in_process("index", str(root / "corpus"), *common, "--model", "efficientnet-lite0")
    cli_in_process(
        "audit", str(root / "warmup"), *common
    )  # loads the model: the timed audit is steady
    phases = _PhaseLog()
    logger = logging.getLogger("splitaudit.indexer.match.phases")
    logger.addHandler(phases)
    logger.setLevel(logging.INFO)
    report = home / "report.json"
    wall, cpu = time.perf_counter(), time.process_time()
    cli_in_process("audit", str(root / "split"), *common, "--json", str(report))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    found = re.search(
        rf"{re.escape(REFIT_PHASE)} ([0-9.]+) s", phases.lines[-1] if phases.lines else ""
    )
    return {
        "report": json.loads(report.read_text()),
        "cpu_s": cpu,
        "wall_s": wall,
        "refit_s": float(found.group(1)) if found else 0.0,
    }


def tally(queries: list[Query], report: dict[str, Any]) -> dict[str, list[int]]:
    """Per family: [right, total] — positives near one of their photo's corpus images (plain
    or overlaid), negatives near nothing."""
    from bench.accuracy.overlays import OVERLAYS

    near: dict[str, set[str]] = {}
    for item in report["items"]:
        near[item["key"]] = {
            m["corpus_key"] for m in item["matches"] if m["kind"] in ("near", "exact")
        }
    out: dict[str, list[int]] = {}
    for q in queries:
        hits = near.get(q.key, set())
        copies = {f"{q.target}.png"} | {f"{q.target}-{kind}.png" for kind in OVERLAYS}
        right = bool(hits & copies) if q.target is not None else not hits
        row = out.setdefault(q.family, [0, 0])
        row[0] += int(right)
        row[1] += 1
    return out


def main() -> None:
    """Build the bench, audit it with each library, print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.inset_regions", description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE, help="cache folder")
    parser.add_argument("--seed", type=int, default=0, help="dataset seed (default: %(default)s)")
    parser.add_argument(
        "--page-side",
        type=int,
        help="every test image's shorter side, px (default: as built, 720-960; e.g. 360)",
    )
    parser.add_argument("--before", type=Path, help="another checkout to audit with, as baseline")
    parser.add_argument(
        "--after", type=Path, help="the checkout to measure (default: the installed library)"
    )
    add_audit_only_options(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if audit_only(args, run_audit):
        return
    root = args.cache / (f"seed{args.seed}" + (f"-side{args.page_side}" if args.page_side else ""))
    queries = build(root, args.seed, args.page_side)
    runs = ({"before": args.before} if args.before else {}) | {"after": args.after}
    results = {
        name: audit_in_subprocess("bench.inset_regions", root, root / f"home-{name}", lib)
        for name, lib in runs.items()
    }
    tallies = {name: tally(queries, r["report"]) for name, r in results.items()}
    n = len(queries)
    size = f"shorter side {args.page_side} px" if args.page_side else f"{WEB_SIZE}"
    print(f"\ninset regions bench (seed {args.seed}): {n} test images at {size}\n")
    print(
        "| family (positives: near their copy; negatives: near nothing) | n | "
        + " | ".join(runs)
        + " |"
    )
    print("|---|---:|" + "---:|" * len(runs))
    for family in sorted(tallies["after"]):
        total = tallies["after"][family][1]
        cells = " | ".join(str(tallies[name][family][0]) for name in runs)
        print(f"| {family} | {total} | {cells} |")
    print()
    for name, r in results.items():
        print(
            f"audit {name}: {1000 * r['cpu_s'] / n:.1f} ms CPU, {1000 * r['wall_s'] / n:.1f} ms "
            f"wall per test image; inset refits {1000 * r['refit_s'] / n:.1f} ms wall per image"
        )
    if "before" in results:
        ratio = results["after"]["cpu_s"] / results["before"]["cpu_s"]
        print(f"after / before: {ratio:.2f}x CPU time")


if __name__ == "__main__":
    main()
