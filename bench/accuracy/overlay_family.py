"""``python -m bench.accuracy.overlay_family``: shared overlays and insets, before / after.

The overlay family (issue 22): photo regions (the 2 x 2 tiles and the whole of each offline
photo) split by photo into two halves, A and B. The corpus holds 60 A-photos under each of
six overlays (``bench.accuracy.overlays``: tiled text watermark, centred watermark, corner
logo, caption bands, frame, window chrome) and a few plain ones; the test split holds 60
**unrelated** B-photos under each same overlay (every one should be clean), and A-photos with
the overlay removed or swapped for another kind (each should be near its corpus copy).

The inset family (issue 23): A-photos shown at 30 / 50 / 70% of the width of a
screenshot-like canvas (each should be near its plain corpus copy, the box drawn on the test
image) and B-photos in the same canvas (clean).

Pairs are scored the way ``python -m bench.accuracy`` scores them (hashes, cosine, the pixel
verifier, then the engine's geometric shortlist), once with this code and once with the
geometric step as it was before the template rules (``geometric_step_before``: the content
check, the template veto and query-time burstiness only): the same images and features, so the
two columns differ only by the geometric step. Also counts the true pairs near (every (test,
corpus) pair of the same photo region, not only test images) and the unrelated test images
reported *semantic* (an overlay must not make them so either), and prints, side by side for
the geometric fits, how the options the issue lists separate overlay fits from copies (content
agreement, inlier coverage, shared keypoints), and the geometric step's time per test image.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image

from bench.accuracy.dataset import Dataset, Item
from bench.accuracy.overlays import OVERLAYS, fit_photo, inset
from bench.accuracy.photos import Photo, collect_photos
from bench.accuracy.scores import PairScores, compute_pair_scores, compute_table, nominated_pairs
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.match import content_check, geometry
from splitaudit.indexer.match.content_region import content_cosine, needs_content
from splitaudit.indexer.match.geometric_tier import GeometricTier, shortlist
from splitaudit.indexer.match.geometry import GeometricMatch
from splitaudit.indexer.match.thresholds import Thresholds, thresholds_for_model

log = logging.getLogger(__name__)
CACHE = Path(__file__).resolve().parent.parent / ".cache"
FAMILY_VERSION = 1
PER_KIND = 60  # unrelated corpus and test photos under each overlay
RECALL_PER_KIND = 12  # A-photos with the overlay removed, and as many swapped, per kind
INSET_FRACTIONS = (0.3, 0.5, 0.7)
INSETS_PER_FRACTION = 15
PLAIN = 24  # plain A-photos in the corpus (the insets' sources)


@dataclass(frozen=True)
class Region:
    """A region of an offline photo: its 2 x 2 tile or the whole photo."""

    photo: Photo
    index: int  # 0-3: tiles, 4: whole
    box: tuple[float, float, float, float]

    @property
    def key(self) -> str:
        return f"{self.photo.name}-{self.index}"

    def image(self) -> Image.Image:
        return self.photo.image.crop(tuple(round(v) for v in self.box))  # type: ignore[arg-type]


def _regions(photos: list[Photo]) -> list[Region]:
    out = []
    for photo in photos:
        w, h = photo.image.size
        boxes = [
            (0.0, 0.0, w / 2, h / 2),
            (w / 2, 0.0, float(w), h / 2),
            (0.0, h / 2, w / 2, float(h)),
            (w / 2, h / 2, float(w), float(h)),
            (0.0, 0.0, float(w), float(h)),
        ]
        out.extend(Region(photo, k, box) for k, box in enumerate(boxes))
    return out


def _take(regions: list[Region], start: int, n: int) -> list[Region]:
    return [regions[(start + k) % len(regions)] for k in range(n)]


def build_family(root: Path, seed: int = 0) -> Dataset:
    """Write the overlay and inset images under ``root`` (deterministic for a seed)."""
    rng = np.random.default_rng(seed + 1000)
    photos = collect_photos()
    order = rng.permutation(len(photos))
    half = len(photos) // 2
    a_regions = _regions([photos[i] for i in sorted(order[:half])])
    b_regions = _regions([photos[i] for i in sorted(order[half:])])
    (root / "images").mkdir(parents=True, exist_ok=True)
    items: list[Item] = []

    def add(image: Image.Image, item_id: str, role: str, region: Region, transform: str) -> None:
        file = f"images/{item_id}.png"
        if not (root / file).is_file():  # deterministic: a cached build is reused
            image.convert("RGB").save(root / file, format="PNG")
        items.append(
            Item(item_id, role, "overlay", region.photo.name, region.box, transform, None, file)
        )

    kinds = list(OVERLAYS)
    for k, kind in enumerate(kinds):
        overlay = OVERLAYS[kind]
        corpus = _take(a_regions, 11 * k, PER_KIND)
        for region in corpus:
            add(overlay(region.image()), f"c-{kind}-{region.key}", "corpus", region, kind)
        for region in _take(b_regions, 13 * k, PER_KIND):
            add(
                overlay(region.image()),
                f"u-{kind}-{region.key}",
                "query",
                region,
                f"unrelated:{kind}",
            )
        for n, region in enumerate(corpus[:RECALL_PER_KIND]):
            add(
                fit_photo(region.image()),
                f"r-{kind}-{region.key}",
                "query",
                region,
                f"removed:{kind}",
            )
            other = kinds[(k + 1 + n % (len(kinds) - 1)) % len(kinds)]
            add(
                OVERLAYS[other](region.image()),
                f"s-{kind}-{region.key}",
                "query",
                region,
                f"swapped:{kind}",
            )
    plain = _take(a_regions, 5, PLAIN)
    for region in plain:
        add(region.image(), f"c-plain-{region.key}", "corpus", region, "plain")
    for fraction in INSET_FRACTIONS:
        for region in _take(plain, int(fraction * 10), INSETS_PER_FRACTION):
            name = f"inset_{round(fraction * 100)}"
            add(
                inset(region.image(), fraction, rng), f"i{name}-{region.key}", "query", region, name
            )
    for n, region in enumerate(_take(b_regions, 3, INSETS_PER_FRACTION)):
        fraction = INSET_FRACTIONS[n % len(INSET_FRACTIONS)]
        add(
            inset(region.image(), fraction, rng),
            f"iu-{region.key}",
            "query",
            region,
            "unrelated:inset",
        )
    return Dataset(root, tuple(items))


def _overlaps(a: tuple[float, ...] | None, b: tuple[float, ...] | None) -> bool:
    if a is None or b is None:
        return False
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def labels(queries: list[Item], corpus: list[Item]) -> npt.NDArray[np.int8]:
    """1: the same photo region (shares content), 0: another photo, -1: ignored (overlapping
    regions of one photo, or disjoint regions of one photo: same scene)."""
    out = np.zeros((len(queries), len(corpus)), np.int8)
    for i, q in enumerate(queries):
        for j, c in enumerate(corpus):
            if q.photo != c.photo:
                continue
            out[i, j] = 1 if q.box == c.box else -1
    return out


@contextmanager
def geometric_step_before() -> Iterator[None]:
    """The geometric step as it was before the template rules (``GeometricMatch.on_template``:
    the agreeing cells' brightness layouts, inliers in the middle): the content check, the
    template veto and query-time burstiness only."""
    saved = content_check.AGREEING_LAYOUT, content_check.TEXTURE_VETO, geometry.MIN_CENTRAL
    content_check.AGREEING_LAYOUT = content_check.TEXTURE_VETO = -2.0
    geometry.MIN_CENTRAL = 0
    try:
        yield
    finally:
        content_check.AGREEING_LAYOUT, content_check.TEXTURE_VETO, geometry.MIN_CENTRAL = saved


@dataclass
class GeometryRun:
    """The geometric step over the shortlist: support per pair and the fits themselves."""

    support: npt.NDArray[np.float32]
    fits: dict[tuple[int, int], GeometricMatch]
    seconds: float
    pairs: int
    images: int


def run_geometry(
    dataset: Dataset,
    queries: list[Item],
    corpus: list[Item],
    scores: PairScores,
    thresholds: Thresholds,
) -> GeometryRun:
    """``scores.compute_geometry`` keeping the fits (the engine's shortlist and tier)."""
    nominated = nominated_pairs(scores.cosine, scores.phash_hamming, thresholds.candidate_hamming)
    settled = thresholds.near_mask(
        scores.phash_hamming, scores.cosine, scores.verify, scores.min_side
    )
    support = np.full(scores.cosine.shape, np.nan, np.float32)
    fits: dict[tuple[int, int], GeometricMatch] = {}
    tier = GeometricTier(threads=1)

    def load(j: int) -> Image.Image:
        return decode_image(dataset.path(corpus[j]).read_bytes()).image

    images = 0
    for i, item in enumerate(queries):
        # the engine's candidates: vector and pHash top-k, and the pairs near by hash (which
        # it confirms)
        cols = np.flatnonzero(nominated[i] | settled[i])
        picked = shortlist(
            scores.cosine[i, cols].tolist(),
            settled[i, cols].tolist(),
            scores.min_side[i, cols].tolist(),
            thresholds,
        )
        if not picked:
            continue
        images += 1
        chosen = [int(cols[n]) for n in picked]
        query = decode_image(dataset.path(item).read_bytes()).image
        for j, match in zip(chosen, tier.match(query, chosen, load), strict=True):
            support[i, j] = match.support
            fits[(i, j)] = match
    tier.close()
    return GeometryRun(support, fits, tier.seconds, tier.pairs, images)


def _near(
    scores: PairScores, support: npt.NDArray[np.float32], t: Thresholds
) -> npt.NDArray[np.bool_]:
    return t.near_mask(scores.phash_hamming, scores.cosine, scores.verify, scores.min_side, support)


def _rules(
    scores: PairScores, t: Thresholds, support: npt.NDArray[np.float32]
) -> dict[str, npt.NDArray[np.bool_]]:
    """The near rules other than the geometric one, each alone (``Thresholds.near_mask``), and
    the pairs the geometric step refused as an overlay (support <= -geometry_inliers: no rule
    holds)."""
    small = t.small_mask(scores.min_side)
    with np.errstate(invalid="ignore"):
        vetoed = support <= -t.geometry_inliers
        return {
            "pHash": t.hash_mask(scores.phash_hamming, scores.verify, small, scores.cosine)
            & ~vetoed,
            "verifier": (scores.verify >= t.verify_score)
            & t.candidate_mask(scores.phash_hamming, scores.cosine, scores.min_side)
            & ~vetoed,
            "refused as overlay": vetoed,
        }


def _groups(queries: list[Item]) -> dict[str, npt.NDArray[np.bool_]]:
    names = list(dict.fromkeys(q.transform for q in queries))
    return {n: np.array([q.transform == n for q in queries]) for n in names}


def main() -> None:
    """Build (cached) the family, score it before / after, print the tables."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy.overlay_family", description=__doc__
    )
    parser.add_argument("--model", default="efficientnet-lite0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument(
        "--content-only",
        action="store_true",
        help="only this geometric step and the semantic verdicts with / without the content "
        "cosine of fits refused as overlay (issue 22), not the before / after near tables",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = args.cache / f"overlay_family-v{FAMILY_VERSION}-s{args.seed}"
    dataset = build_family(root, args.seed)
    queries, corpus = dataset.select("query"), dataset.select("corpus")
    query_table = compute_table(dataset, queries, args.model, root)
    corpus_table = compute_table(dataset, corpus, args.model, root)
    t = thresholds_for_model(corpus_table.model_id)
    scores = compute_pair_scores(dataset, queries, query_table, corpus_table, t)
    truth = labels(queries, corpus)
    if args.content_only:
        run = run_geometry(dataset, queries, corpus, scores, t)
        _content_semantic(dataset, queries, corpus, scores, run, truth, t, args.model)
        return
    with geometric_step_before():
        before = run_geometry(dataset, queries, corpus, scores, t)
    after = run_geometry(dataset, queries, corpus, scores, t)
    near = {"before": _near(scores, before.support, t), "after": _near(scores, after.support, t)}
    by_geometry = {
        "before": np.nan_to_num(before.support) >= t.geometry_inliers,
        "after": np.nan_to_num(after.support) >= t.geometry_inliers,
    }
    print(f"\noverlay + inset family: {len(queries)} test images x {len(corpus)} corpus images\n")
    print(
        f"{'group':<24}{'n':>4}{'before':>12}{'after':>12}   (unrelated: test images with a false "
        "near, g: by the geometric rule; others: recall)"
    )
    for name, rows in _groups(queries).items():
        cells = []
        for when in ("before", "after"):
            if name.startswith("unrelated"):
                value = (near[when][rows] & (truth[rows] == 0)).any(axis=1).sum()
                geo = (by_geometry[when][rows] & (truth[rows] == 0)).any(axis=1).sum()
                cells.append(f"{value:>4} ({geo} g)")
                if when == "after":
                    others = {
                        rule: int((mask[rows] & (truth[rows] == 0)).any(axis=1).sum())
                        for rule, mask in _rules(scores, t, after.support).items()
                    }
            else:
                found = (near[when][rows] & (truth[rows] == 1)).any(axis=1)
                cells.append(f"{100 * found.mean():>9.1f}%")
        line = f"{name:<24}{int(rows.sum()):>4}{cells[0]:>12}{cells[1]:>12}"
        if name.startswith("unrelated"):
            line += "   other rules after: " + ", ".join(f"{k} {v}" for k, v in others.items())
        print(line)
    for when in ("before", "after"):
        run = before if when == "before" else after
        semantic = t.semantic_mask(
            scores.phash_hamming, scores.cosine, scores.verify, scores.min_side, run.support
        )
        unrelated = np.array([q.transform.startswith("unrelated") for q in queries])
        flagged = (semantic[unrelated] & (truth[unrelated] == 0)).any(axis=1).sum()
        print(
            f"{when}: true pairs near {int((near[when] & (truth == 1)).sum())} of "
            f"{int((truth == 1).sum())}; unrelated test images reported semantic {flagged} of "
            f"{int(unrelated.sum())}"
        )
    _content_semantic(dataset, queries, corpus, scores, after, truth, t, args.model)
    _options_table(after, truth, t)
    _inset_boxes(queries, after, truth, t)
    for when, run in (("before", before), ("after", after)):
        print(
            f"geometric step {when}: {run.pairs} pairs for {run.images} test images in {run.seconds:.1f} s: "
            f"{1000 * run.seconds / max(run.pairs, 1):.1f} ms per pair, "
            f"{1000 * run.seconds / max(run.images, 1):.0f} ms per test image"
        )
    _check_cost(after)


def _options_table(run: GeometryRun, truth: npt.NDArray[np.int8], t: Thresholds) -> None:
    """How each option separates the plausible fits of >= geometry_inliers: copies vs overlays."""
    rows = []
    for (i, j), m in run.fits.items():
        if m.plausible and m.inliers >= t.geometry_inliers and truth[i, j] >= 0:
            score = m.content.score if m.content is not None else float("nan")
            outside = m.content.outside if m.content is not None else None
            rows.append(
                (
                    int(truth[i, j]),
                    m.inliers,
                    score,
                    m.coverage,
                    np.nan if outside is None else outside,
                    m.own_inliers,
                    _aligned_layout(m),
                )
            )
    if not rows:
        print("\nno plausible fits to compare")
        return
    arr = np.array(rows, np.float64)
    copies, overlays = arr[arr[:, 0] == 1], arr[arr[:, 0] == 0]
    print(
        f"\nplausible fits with >= {t.geometry_inliers} inliers: {len(copies)} copies, "
        f"{len(overlays)} unrelated (overlay) pairs"
    )
    print(f"{'option':<38}{'copies kept':>12}{'overlay fits kept':>19}")
    for name, column, cuts in (
        ("content agreement >=", 2, (0.3, 0.4, 0.5, 0.6)),
        ("agreement away from inliers >=", 4, (0.3, 0.4, 0.5, 0.6)),
        ("inlier coverage (4x4 cells) >=", 3, (0.25, 0.375, 0.5, 0.625)),
        ("inliers not shared (burstiness) >=", 5, (6, 12, 24)),
        ("agreeing layout (aligned fits) >=", 6, (0.5, 0.8, 0.85, 0.9)),
    ):
        for cut in cuts:
            kept_c = int((copies[:, column] >= cut).sum())
            kept_o = int((overlays[:, column] >= cut).sum())
            print(
                f"{name + f' {cut:.3g}':<38}{kept_c:>6} / {len(copies):<5}{kept_o:>9} / {len(overlays):<5}"
            )
    for label, part in (("copies", copies), ("overlay fits", overlays)):
        if len(part):
            print(
                f"  {label}: agreement min {np.nanmin(part[:, 2]):.2f} median {np.nanmedian(part[:, 2]):.2f} "
                f"max {np.nanmax(part[:, 2]):.2f}; away from inliers min {np.nanmin(part[:, 4]):.2f} "
                f"max {np.nanmax(part[:, 4]):.2f}; coverage median {np.median(part[:, 3]):.2f}; "
                f"inliers median {np.median(part[:, 1]):.0f}"
            )


def _aligned_layout(m: GeometricMatch) -> float:
    """The agreeing cells' layout of a fit of two images aligned as they are (2.0: not aligned
    or nothing to judge on: the template rule does not apply)."""
    if not m.aligned or m.content is None or m.content.agreeing_layout is None:
        return 2.0
    return m.content.agreeing_layout


def _inset_boxes(
    queries: list[Item], run: GeometryRun, truth: npt.NDArray[np.int8], t: Thresholds
) -> None:
    """How far the reported box on the test image is from where the inset was pasted (IoU)."""
    ious = []
    for (i, j), m in run.fits.items():
        if (
            queries[i].transform.startswith("inset_")
            and truth[i, j] == 1
            and m.is_copy(t.geometry_inliers)
        ):
            ious.append(m.test_box)
    if ious:
        widths = [b[2] - b[0] for b in ious]
        print(
            f"\ninset fits: {len(ious)}, box width on the test image median {np.median(widths):.2f}"
        )


def _check_cost(run: GeometryRun) -> None:
    """Microseconds per content check (measured again on the fits that had one)."""
    from splitaudit.indexer.match.content_check import content_agreement

    checked = [m for m in run.fits.values() if m.content is not None]
    print(f"content checks: {len(checked)} of {run.pairs} pairs")
    if not checked:
        return
    rng = np.random.default_rng(0)
    q = rng.integers(0, 255, (144, 192), dtype=np.uint8)
    r = rng.integers(0, 255, (144, 192), dtype=np.uint8)
    started = time.perf_counter()
    for m in checked[:200]:
        content_agreement(q, (384, 288), r, (384, 288), np.asarray(m.transform).reshape(2, 3))
    per = (time.perf_counter() - started) / min(len(checked), 200)
    print(f"content check: {1e6 * per:.0f} us per checked pair")


def _content_semantic(
    dataset: Dataset,
    queries: list[Item],
    corpus: list[Item],
    scores: PairScores,
    run: GeometryRun,
    truth: npt.NDArray[np.int8],
    t: Thresholds,
    model: str,
) -> None:
    """Semantic verdicts per group without and with the content-only cosine of the fits refused
    as an overlay (``content_region``), same run, same fits; and its cost per test image."""
    from splitaudit.indexer.embed.loader import load_embedder

    embedder = load_embedder(model)
    content = np.full(scores.cosine.shape, np.nan, np.float64)
    near = _near(scores, run.support, t)
    started, cpu, embedded, rows = time.perf_counter(), time.process_time(), 0, set()
    for (i, j), match in run.fits.items():
        if near[i, j] or not scores.cosine[i, j] >= t.semantic_cosine or not needs_content(match):
            continue
        query = decode_image(dataset.path(queries[i]).read_bytes()).image
        reference = decode_image(dataset.path(corpus[j]).read_bytes()).image
        value = content_cosine(query, reference, match, embedder.embed)
        rows.add(i)
        if value is not None:
            content[i, j] = value
            embedded += 1
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    args = (scores.phash_hamming, scores.cosine, scores.verify, scores.min_side, run.support)
    without, with_content = t.semantic_mask(*args), t.semantic_mask(*args, content)
    print("\nsemantic (after), without / with the content-only cosine of fits refused as overlay:")
    for name, group in _groups(queries).items():
        if name.startswith("unrelated"):
            a = int((without[group] & (truth[group] == 0)).any(axis=1).sum())
            b = int((with_content[group] & (truth[group] == 0)).any(axis=1).sum())
            print(
                f"  {name:<24} unrelated test images semantic {a:>3} -> {b:>3} of {int(group.sum())}"
            )
    for label, tier in (("near or semantic", True), ("semantic", False)):
        base = (without | near) if tier else without
        new = (with_content | near) if tier else with_content
        print(
            f"  true pairs {label}: {int((base & (truth == 1)).sum())} -> "
            f"{int((new & (truth == 1)).sum())} of {int((truth == 1).sum())}"
        )
    kept = (truth == 0) & ~np.isnan(content)
    if kept.any():
        values = content[kept]
        print(
            f"  content cosines of unrelated pairs: {len(values)}, max {values.max():.3f}, "
            f">= {t.semantic_cosine}: {int((values >= t.semantic_cosine).sum())}"
        )
    true_content = content[(truth == 1) & ~np.isnan(content)]
    if len(true_content):
        print(f"  content cosines of true pairs: {len(true_content)}, min {true_content.min():.3f}")
        for i, j in zip(*np.nonzero((truth == 1) & ~np.isnan(content)), strict=True):
            print(
                f"    {queries[i].transform} -> {corpus[j].transform}: cosine "
                f"{scores.cosine[i, j]:.3f}, content {content[i, j]:.3f}"
            )
    print(
        f"  content check: {len(rows)} test images, {embedded} pairs embedded, {seconds:.1f} s wall "
        f"/ {cpu:.1f} s CPU: {1000 * seconds / len(queries):.1f} ms wall per test image of "
        f"{len(queries)} ({1000 * seconds / max(len(rows), 1):.0f} ms per test image checked)"
    )


if __name__ == "__main__":
    main()
