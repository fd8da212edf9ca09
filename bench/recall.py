"""``python -m bench.recall``: recall where copies hide (issue 23): thumbnails and orientations.

Builds (once, cached) a corpus folder and a test split from the offline photos
(``bench.accuracy.photos``), indexes the corpus and audits the split through the CLI (``splitaudit index`` /
``splitaudit audit --json``, run in-process) and prints
per-family recall, false positives and audit time per image:

- thumbnails at 32 / 48 / 64 px, re-rendered from the photo the way a re-scraped copy differs:
  ``shift`` (up to 12% of the side), ``zoom`` (0.75-1.33), ``colour`` (brightness,
  contrast, saturation, hue +-10 degrees), ``jpeg`` (quality 50-80) and ``combo`` (all four);
- ``orient-*``: the seven non-identity elements of the dihedral group (vertical flip, quarter
  turns, transposes, left-right mirror), on thumbnails and on 384-px photos;
- tiles the verifier cannot tell apart from other pictures (``verify.verifiable``: flat, like
  sky or a plain wall, or sparse, like a few stars on black) are left out as sources; copies
  the edit itself left flat (a faint sky tile recoloured and re-encoded) are counted, and a
  second table gives each thumbnail family's recall without them;
- ``inset-30`` / ``-50`` / ``-70``: each corpus photo shown inside a screenshot-like canvas at
  that share of its side (``bench.accuracy.overlays.inset``);
- negatives that must match nothing: ``unrelated`` (thumbnails and photos of photos that are
  not in the corpus), ``unrelated-inset`` (held-out photos inside the same canvas) and
  ``sibling`` (a neighbouring, non-overlapping tile of a corpus
  thumbnail's photo: same scene, no shared pixels).

``--before PATH`` runs the same audit on another checkout of the library too (e.g.
``git worktree add /tmp/before e9bbaff``), in a subprocess, so before/after come from one
run on one machine. imagededup's PHash at distance 10 is printed beside it when installed.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import re
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from bench.library import (
    add_audit_only_options,
    audit_in_subprocess,
    audit_only,
    cli_in_process,
)

log = logging.getLogger(__name__)

CACHE = Path(__file__).resolve().parent / ".cache" / "recall"
RECIPE = 4  # bump when the dataset recipe changes
SIZES = (32, 48, 64)
N_CORPUS_PHOTOS = 20
LARGE_SIDE = 384
MAX_SHIFT = 0.12  # of the side
ZOOMS = (0.75, 1.33)
GRID = 3  # tiles per side of the photo's central square; even tiles indexed, odd ones siblings
ORIENTATIONS = {
    "mirror": Image.Transpose.FLIP_LEFT_RIGHT,
    "flip": Image.Transpose.FLIP_TOP_BOTTOM,
    "rot90": Image.Transpose.ROTATE_90,
    "rot180": Image.Transpose.ROTATE_180,
    "rot270": Image.Transpose.ROTATE_270,
    "transpose": Image.Transpose.TRANSPOSE,
    "transverse": Image.Transpose.TRANSVERSE,
}
THUMB_FAMILIES = ("shift", "zoom", "colour", "jpeg", "combo")
INSET_FRACTIONS = (0.3, 0.5, 0.7)  # of a screenshot-like canvas's side (bench.accuracy.overlays)
IMAGEDEDUP_THRESHOLD = 10
Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Query:
    """One split image: its family, size and the corpus key it copies (None: a negative)."""

    key: str
    family: str
    size: int
    target: str | None


def _tiles(image: Image.Image) -> list[Box]:
    """A GRID x GRID split of the photo's central square inset to 80% (room for shifts, zooms)."""
    w, h = image.size
    side = 0.8 * min(w, h)
    x0, y0 = (w - side) / 2, (h - side) / 2
    step = side / GRID
    return [
        (x0 + c * step, y0 + r * step, x0 + (c + 1) * step, y0 + (r + 1) * step)
        for r in range(GRID)
        for c in range(GRID)
    ]


def _render(photo: Image.Image, box: Box, size: int) -> Image.Image:
    return photo.resize((size, size), Image.Resampling.LANCZOS, box=box)


def _moved(box: Box, rng: np.random.Generator, shift: bool, zoom: bool) -> Box:
    """``box`` shifted by up to MAX_SHIFT of its side and / or zoomed by a factor in ZOOMS."""
    x0, y0, x1, y1 = box
    side = x1 - x0
    dx = dy = 0.0
    if shift:
        dx, dy = rng.uniform(-MAX_SHIFT, MAX_SHIFT, size=2) * side
        if max(abs(dx), abs(dy)) < 0.5 * MAX_SHIFT * side:  # at least half the range on one axis
            dx = float(np.copysign(rng.uniform(0.5, 1.0) * MAX_SHIFT * side, dx))
    factor = 1.0
    if zoom:  # log-uniform, at least 8% away from 1: the content grows or shrinks visibly
        factor = 1.0
        while abs(np.log(factor)) < np.log(1.08):
            factor = float(np.exp(rng.uniform(np.log(ZOOMS[0]), np.log(ZOOMS[1]))))
    cx, cy = (x0 + x1) / 2 + dx, (y0 + y1) / 2 + dy
    half = side / factor / 2  # factor > 1: zoom in (the region shrinks)
    return (cx - half, cy - half, cx + half, cy + half)


def _recolour(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Brightness, contrast, saturation and a hue rotation of up to 10 degrees."""
    from PIL import ImageEnhance

    image = ImageEnhance.Brightness(image).enhance(float(rng.uniform(0.85, 1.15)))
    image = ImageEnhance.Contrast(image).enhance(float(rng.uniform(0.85, 1.15)))
    image = ImageEnhance.Color(image).enhance(float(rng.uniform(0.7, 1.4)))
    hsv = np.asarray(image.convert("HSV")).copy()
    turn = rng.uniform(-10.0, 10.0) / 360.0 * 256.0
    hsv[..., 0] = (hsv[..., 0].astype(np.float32) + turn).round().astype(np.int64) % 256
    return Image.fromarray(hsv, "HSV").convert("RGB")


def _jpeg(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=int(rng.integers(50, 81)))
    buf.seek(0)
    return Image.open(buf).convert("RGB")


def _thumb_copy(
    photo: Image.Image, box: Box, size: int, family: str, rng: np.random.Generator
) -> Image.Image:
    moved = _moved(box, rng, family in ("shift", "combo"), family in ("zoom", "combo"))
    image = _render(photo, moved, size)
    if family in ("colour", "combo"):
        image = _recolour(image, rng)
    if family in ("jpeg", "combo"):
        image = _jpeg(image, rng)
    return image


def _large(photo: Image.Image) -> Image.Image:
    scale = LARGE_SIDE / max(photo.size)
    return photo.resize((round(photo.width * scale), round(photo.height * scale)))


def build(
    root: Path, seed: int, distractors: int = 0, sizes: tuple[int, ...] = SIZES
) -> list[Query]:
    """Write ``root/corpus`` and ``root/split`` (deterministic for a seed); the split's labels.
    ``distractors``: that many thumbnails of unrelated photos added to the corpus
    (``bench.distractors``); ``sizes``: the thumbnails' sides, in turn (the distractors' too)."""
    from bench.accuracy.photos import collect_photos
    from splitaudit.indexer.match.verify import verifiable

    manifest = root / "queries.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text())
        if (
            data.get("recipe") == RECIPE
            and data.get("seed") == seed
            and data.get("distractors", 0) == distractors
            and tuple(data.get("sizes", SIZES)) == tuple(sizes)
        ):
            return [Query(**q) for q in data["queries"]]
    for stale in ("corpus", "split", "warmup"):  # an earlier recipe's files must not be audited
        shutil.rmtree(root / stale, ignore_errors=True)
    rng = np.random.default_rng(seed)
    photos = collect_photos()
    order = rng.permutation(len(photos))
    indexed = [photos[i] for i in sorted(order[:N_CORPUS_PHOTOS])]
    held_out = [photos[i] for i in sorted(order[N_CORPUS_PHOTOS:])]
    corpus, split = root / "corpus", root / "split"
    for folder in (corpus, split):
        folder.mkdir(parents=True, exist_ok=True)
    queries: list[Query] = []
    turns = list(ORIENTATIONS)

    def add(image: Image.Image, family: str, size: int, target: str | None) -> None:
        key = f"{family}/{len(queries):04d}.png"
        (split / family).mkdir(exist_ok=True)
        image.convert("RGB").save(split / key)
        queries.append(Query(key, family, size, target))

    n = skipped = 0
    for photo in indexed:
        name = photo.name
        for t, box in enumerate(_tiles(photo.image)):
            size = sizes[n % len(sizes)]
            if t % 2:  # a sibling: same scene, next to corpus tiles, no pixels in common
                add(_render(photo.image, box, size), "sibling", size, None)
                continue
            source = _render(photo.image, box, size)
            if not verifiable(source):  # flat or sparse: no pixel test tells its copies apart
                skipped += 1
                continue
            n += 1
            target = f"{name}-t{t}-{size}.png"
            source.save(corpus / target)
            for family in THUMB_FAMILIES:
                add(_thumb_copy(photo.image, box, size, family, rng), family, size, target)
            turn = turns[n % len(turns)]
            add(source.transpose(ORIENTATIONS[turn]), f"orient-{turn}", size, target)
        large = _large(photo.image)
        target = f"{name}-large.png"
        large.save(corpus / target)
        for turn, op in ORIENTATIONS.items():
            add(large.transpose(op), f"orient-{turn}", LARGE_SIDE, target)
    for photo in held_out:
        for t, box in enumerate(_tiles(photo.image)):
            size = sizes[t % len(sizes)]
            add(_render(photo.image, box, size), "unrelated", size, None)
        large = _large(photo.image)
        add(large, "unrelated", LARGE_SIDE, None)
        add(large.transpose(ORIENTATIONS[turns[len(queries) % 7]]), "unrelated", LARGE_SIDE, None)
    # Insets: each corpus photo (its 384-px copy) shown inside a 1280x800 screenshot-like canvas
    # at 30 / 50 / 70% of its side; held-out photos in the same canvas must match nothing.
    from bench.accuracy.overlays import inset

    placing = np.random.default_rng(seed + 7)
    for photo in indexed:
        for fraction in INSET_FRACTIONS:
            shot = inset(_large(photo.image), fraction, placing)
            add(shot, f"inset-{round(100 * fraction)}", shot.height, f"{photo.name}-large.png")
    for k, photo in enumerate(held_out):
        fraction = INSET_FRACTIONS[k % len(INSET_FRACTIONS)]
        add(inset(_large(photo.image), fraction, placing), "unrelated-inset", 800, None)
    if distractors:
        from bench.distractors import write_distractors

        write_distractors(corpus, distractors, sizes, seed, [p.image for p in photos])
    (root / "warmup").mkdir(exist_ok=True)
    _render(held_out[0].image, _tiles(held_out[0].image)[0], 40).save(root / "warmup" / "w.png")
    manifest.write_text(
        json.dumps(
            {
                "recipe": RECIPE,
                "seed": seed,
                "distractors": distractors,
                "sizes": list(sizes),
                "queries": [asdict(q) for q in queries],
            }
        )
    )
    log.warning(
        "recall bench: %d corpus images, %d split images; %d flat or sparse tiles left out",
        n + len(indexed),
        len(queries),
        skipped,
    )
    return queries


def run_audit(root: Path, home: Path) -> dict[str, Any]:
    """Index ``root/corpus`` and audit ``root/split`` into a fresh ``home``; report and times."""
    import splitaudit.indexer

    if home.exists():
        shutil.rmtree(home)
    common = ("--corpus", "bench", "--home", str(home))
    cli_in_process("index", str(root / "corpus"), *common, "--model", "efficientnet-lite0")
    # A one-image audit first loads the model: the timed audit is the steady state.
    cli_in_process("audit", str(root / "warmup"), *common)
    report = home / "report.json"
    wall, cpu = time.perf_counter(), time.process_time()
    cli_in_process("audit", str(root / "split"), *common, "--json", str(report))
    return {
        "verify_us_per_pair": _pair_cost(root),
        "align_us_per_pair": _align_cost(root),
        "report": json.loads(report.read_text()),
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "library": str(Path(splitaudit.indexer.__file__).resolve().parent),
    }


def _pair_cost(root: Path, queries: int = 40, candidates: int = 10) -> float:
    """CPU microseconds per verified small pair: the engine's call (one test image against its
    candidates' stored thumbnails, zoom-in search on), on the bench's own thumbnails."""
    from splitaudit.indexer.match.verify import verify_scores, verify_thumbnail

    small = _bench_thumbnails(root)
    thumbs = np.stack([verify_thumbnail(Image.open(p).convert("RGB")) for p in small])
    split = sorted((root / "split" / "combo").glob("*.png"))[:queries]
    images = [Image.open(p).convert("RGB") for p in split]
    from threadpoolctl import threadpool_limits

    started = time.process_time()
    with threadpool_limits(limits=1, user_api="blas"):  # as the engine runs it
        for n, image in enumerate(images):
            picked = thumbs[[(n + k) % len(thumbs) for k in range(candidates)]]
            verify_scores(image, picked, True)
    return 1e6 * (time.process_time() - started) / (len(images) * candidates)


def _align_cost(root: Path, queries: int = 40, candidates: int = 10) -> float | None:
    """CPU microseconds per pair of the low-resolution alignment (``low_res_align``) on the
    pairs ``_pair_cost`` times, BLAS on one thread as in the engine (its coarse step is one
    small matrix product per query: BLAS's own threads would double its CPU time); None for a
    library without it."""
    try:
        from splitaudit.indexer.match.low_res_align import aligned_scores, prepare_query
    except ImportError:
        return None
    from splitaudit.indexer.match.verify import verify_thumbnail

    small = _bench_thumbnails(root)
    thumbs = np.stack([verify_thumbnail(Image.open(p).convert("RGB")) for p in small])
    split = sorted((root / "split" / "combo").glob("*.png"))[:queries]
    images = [Image.open(p).convert("RGB") for p in split]
    from threadpoolctl import threadpool_limits

    started = time.process_time()
    with threadpool_limits(limits=1, user_api="blas"):  # as the engine runs it
        for n, image in enumerate(images):
            picked = thumbs[[(n + k) % len(thumbs) for k in range(candidates)]]
            aligned_scores(prepare_query(image), picked)
    return 1e6 * (time.process_time() - started) / (len(images) * candidates)


def _bench_thumbnails(root: Path) -> list[Path]:
    """The corpus thumbnails copied by the split (distractors and large photos left out)."""
    return [
        p
        for p in sorted((root / "corpus").glob("*.png"))
        if "large" not in p.name and not p.name.startswith("d-")
    ]


@dataclass
class Outcome:
    """Per-family found / total for positives, flagged / total for negatives, and the copies
    also matched to a corpus image of another photo (``wrong``) or to another image of their
    own photo (``related``: a tile inside the 384-px copy of its photo, or that copy holding
    the tile: shared pixels, a crop relation, not a false match)."""

    found: dict[str, list[int]]
    wrong: int
    found_keys: frozenset[str] = frozenset()  # positives matched to their corpus image
    related: int = 0


_CORPUS_NAME = re.compile(r"^(?P<photo>.+?)-(?:t\d+-\d+|large)\.png$")


def source_photo(corpus_key: str) -> str | None:
    """The photo a bench corpus image was cut from (``{photo}-t{tile}-{side}.png`` or
    ``{photo}-large.png``); None for a distractor (``d-...``) or another name."""
    if corpus_key.startswith("d-"):
        return None
    found = _CORPUS_NAME.match(corpus_key)
    return found["photo"] if found else None


def score(queries: list[Query], flagged: dict[str, set[str]]) -> Outcome:
    """``flagged[key]``: the corpus keys a query was matched to as exact or near."""
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    wrong = related = 0
    keys: set[str] = set()
    for q in queries:
        hits = flagged.get(q.key, set())
        if q.target is not None and q.target in hits:
            keys.add(q.key)
        groups = [q.family]
        if q.family in THUMB_FAMILIES:
            groups.append(f"{q.family}@{q.size}")
        if q.family.startswith("orient-"):
            groups.append("orient@thumb" if q.size < 96 else "orient@large")
        for g in groups:
            found[g][1] += 1
            found[g][0] += bool(hits) if q.target is None else q.target in hits
        if q.target is not None and hits - {q.target}:
            own = source_photo(q.target)
            others = {source_photo(k) for k in hits - {q.target}}
            wrong += own is None or bool(others - {own})
            related += own is not None and own in others
    return Outcome(dict(found), wrong, frozenset(keys), related)


def _near_keys(report: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for item in report["items"]:
        keys = {m["corpus_key"] for m in item["matches"] if m["kind"] in ("exact", "near")}
        out[item["key"]] = keys
    return out


def _imagededup(root: Path, site: Path | None = None) -> dict[str, set[str]] | None:
    """Matches of imagededup's PHash at ``IMAGEDEDUP_THRESHOLD`` (None: not installed);
    ``site``: a site-packages folder holding it (another venv), searched after this one's."""
    if site is not None and str(site) not in sys.path:
        sys.path.append(str(site))
    try:
        from imagededup.methods import PHash
    except ImportError:
        log.warning("imagededup is not installed (pip install imagededup): column skipped")
        return None
    encoder = PHash(verbose=False)

    def hashes(folder: Path) -> dict[str, int]:
        return {
            str(p.relative_to(folder)): int(encoder.encode_image(image_file=str(p)), 16)
            for p in sorted(folder.rglob("*.png"))
        }

    corpus, split = hashes(root / "corpus"), hashes(root / "split")
    keys, values = list(corpus), np.asarray(list(corpus.values()), np.uint64)
    out = {}
    for key, value in split.items():
        dist = np.bitwise_count(values ^ np.uint64(value))
        out[key] = {keys[i] for i in np.flatnonzero(dist <= IMAGEDEDUP_THRESHOLD)}
    return out


def _flat_copies(root: Path, queries: list[Query]) -> set[str]:
    """Keys of thumbnail copies that the edit itself left flat or sparse (``verify.verifiable``
    false on the *copy*: a sky tile recoloured and re-encoded down to noise). Their sources are
    verifiable (flat sources are left out of the bench), but no pixel test tells these copies
    from any other flat thumbnail; the bench counts them and prints recall without them beside."""
    from splitaudit.indexer.match.verify import verifiable

    return {
        q.key
        for q in queries
        if q.family in THUMB_FAMILIES
        and not verifiable(Image.open(root / "split" / q.key).convert("RGB"))
    }


def _flat_note(queries: list[Query], columns: dict[str, Outcome], flat: set[str]) -> str:
    """Per thumbnail family: how many copies are flat, and recall over the others per column."""
    kept = [q for q in queries if q.key not in flat]
    lines = [
        "| family, verifiable copies only | n (flat left out) | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for family in THUMB_FAMILIES:
        total = sum(q.family == family for q in kept)
        left_out = sum(q.family == family for q in queries) - total
        cells = []
        for outcome in columns.values():
            found = outcome.found_keys
            hit = sum(q.family == family and q.key in found for q in kept)
            cells.append(f"{hit / max(total, 1):.3f}")
        lines.append(f"| {family} | {total} ({left_out}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _table(queries: list[Query], columns: dict[str, Outcome]) -> str:
    order = sorted(next(iter(columns.values())).found, key=_family_order)
    names = list(columns)
    lines = ["| family | n | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for g in order:
        total = next(iter(columns.values())).found[g][1]
        cells = [f"{c.found[g][0] / max(total, 1):.3f}" for c in columns.values()]
        label = f"{g} (FP rate)" if g in ("unrelated", "sibling", "unrelated-inset") else g
        lines.append(f"| {label} | {total} | " + " | ".join(cells) + " |")
    lines.append(
        "| wrong corpus item (another photo's) | - | "
        + " | ".join(str(c.wrong) for c in columns.values())
        + " |"
    )
    lines.append(
        "| also another image of its photo (a crop relation) | - | "
        + " | ".join(str(c.related) for c in columns.values())
        + " |"
    )
    return "\n".join(lines)


def _family_order(name: str) -> tuple[int, str]:
    head = name.split("@")[0]
    rank = {f: i for i, f in enumerate(THUMB_FAMILIES)}
    if head in rank:
        return (rank[head], name)
    if head.startswith("orient"):
        return (10, name)
    if head.startswith("inset"):
        return (15, name)
    return (20, name)


def main() -> None:
    """Build the bench, run the audit (current library, optionally ``--before``), print tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.recall", description=__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE, help="cache folder")
    parser.add_argument("--seed", type=int, default=0, help="dataset seed (default: %(default)s)")
    parser.add_argument("--before", type=Path, help="another checkout to audit with, as baseline")
    parser.add_argument(
        "--after", type=Path, help="the checkout to measure (default: the installed library)"
    )
    parser.add_argument(
        "--imagededup-site",
        type=Path,
        help="a site-packages folder with imagededup (e.g. another venv's), for its column",
    )
    parser.add_argument(
        "--distractors",
        type=int,
        default=0,
        help="thumbnails of unrelated photos added to the corpus (bench.distractors; "
        "default: %(default)s)",
    )
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="thumbnail sides, comma-separated (default: %(default)s; 80,96 measures the top of "
        "the 32-96 px range, where a 96-px pair is large)",
    )
    parser.add_argument("--skip-after", action="store_true", help=argparse.SUPPRESS)
    add_audit_only_options(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if audit_only(args, run_audit):
        return
    if args.distractors < 0:
        parser.error("--distractors must be 0 or more")
    try:
        sizes = tuple(int(v) for v in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes must be whole numbers of pixels, got {args.sizes!r}")
    if not sizes or min(sizes) < 8:
        parser.error("--sizes must name sides of 8 px or more")
    suffix = f"-d{args.distractors}" if args.distractors else ""
    if sizes != SIZES:
        suffix += "-px" + "-".join(map(str, sizes))
    root = args.cache / f"seed{args.seed}{suffix}"
    queries = build(root, args.seed, args.distractors, sizes)
    runs: dict[str, Path | None] = {} if args.before is None else {"before": args.before}
    if not args.skip_after:
        runs["after"] = args.after
    columns: dict[str, Outcome] = {}
    times: dict[str, tuple[float, float]] = {}
    costs: dict[str, float] = {}
    align_costs: dict[str, float] = {}
    for name, checkout in runs.items():
        # Each seed keeps its own index homes: two seeds never overwrite each other's.
        result = audit_in_subprocess("bench.recall", root, root / f"home-{name}", checkout)
        columns[name] = score(queries, _near_keys(result["report"]))
        times[name] = (result["wall_s"], result["cpu_s"])
        costs[name] = result["verify_us_per_pair"]
        if result.get("align_us_per_pair") is not None:
            align_costs[name] = result["align_us_per_pair"]
    dedup = _imagededup(root, args.imagededup_site)
    if dedup is not None:
        columns[f"imagededup PHash@{IMAGEDEDUP_THRESHOLD}"] = score(queries, dedup)
    n = len(queries)
    print(f"\nrecall bench (seed {args.seed}): {n} split images against {root / 'corpus'}\n")
    print(_table(queries, columns) + "\n")
    flat = _flat_copies(root, queries)
    print(_flat_note(queries, columns, flat) + "\n")
    for name, (wall, cpu) in times.items():
        print(
            f"audit {name}: {1000 * wall / n:.1f} ms wall, {1000 * cpu / n:.1f} ms CPU per image; "
            f"verifier {costs[name]:.0f} us CPU per 32-64 px pair"
            + (
                f", low-res alignment {align_costs[name]:.0f} us CPU per pair"
                if name in align_costs
                else ""
            )
        )
    if {"before", "after"} <= set(times):
        print(f"after / before: {times['after'][1] / times['before'][1]:.2f}x CPU time")


if __name__ == "__main__":
    main()
