"""Builds (once) and loads the cached accuracy benchmark: originals, edited queries, distractors."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from PIL import Image

from bench.accuracy.photos import Photo, collect_photos, lfw_faces
from bench.accuracy.transforms import (
    HIRES_TRANSFORMS,
    LOWRES_EDITS,
    Box,
    apply_lowres_edit,
    render_region,
)

log = logging.getLogger(__name__)

# Bump when the recipe changes: a cached dataset with another version is rebuilt.
DATASET_VERSION = 5
N_ORIGINALS = 17
DISTRACTOR_CROPS = 10
LOWRES_SIZES = (32, 48, 64)


@dataclass(frozen=True)
class Item:
    """One benchmark image.

    ``role`` is ``corpus`` (indexed), ``query`` (an edited copy of ``target``) or ``probe``
    (semantic probe: two disjoint halves of each photo). ``box`` is the photo region the
    item shows (``None`` for non-photo sources); pairs from overlapping regions of one photo
    that are not the designated (query, target) pair are ignored, never counted negative.
    """

    id: str
    role: str
    subset: str
    photo: str
    box: Box | None
    transform: str
    target: str | None
    file: str


@dataclass(frozen=True)
class Dataset:
    """The benchmark on disk: items in a stable order and the folder holding their files."""

    root: Path
    items: tuple[Item, ...]

    def select(self, role: str) -> list[Item]:
        """Items of one role, in dataset order."""
        return [item for item in self.items if item.role == role]

    def path(self, item: Item) -> Path:
        """Where the item's PNG lives."""
        return self.root / item.file


def _overlap(a: Box | None, b: Box | None) -> bool:
    """Whether two photo regions share any area."""
    if a is None or b is None:
        return False
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def pair_labels(queries: list[Item], corpus: list[Item]) -> npt.NDArray[np.int8]:
    """(n_queries, n_corpus) matrix: 1 = the query's source, 0 = unrelated, -1 = ignored."""
    labels = np.zeros((len(queries), len(corpus)), np.int8)
    column = {item.id: j for j, item in enumerate(corpus)}
    by_photo: dict[str, list[int]] = {}
    for j, item in enumerate(corpus):
        by_photo.setdefault(item.photo, []).append(j)
    for i, query in enumerate(queries):
        for j in by_photo.get(query.photo, []):
            if _overlap(query.box, corpus[j].box):
                labels[i, j] = -1
        assert query.target is not None
        labels[i, column[query.target]] = 1
    return labels


class _Writer:
    """Saves images under ``root/images`` and collects their items."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "images").mkdir(parents=True, exist_ok=True)
        self.items: list[Item] = []

    def add(self, image: Image.Image, **fields: object) -> Item:
        item_id = str(fields["id"])
        file = f"images/{item_id}.png"
        image.convert("RGB").save(self.root / file, format="PNG")
        item = Item(file=file, **fields)  # type: ignore[arg-type]
        self.items.append(item)
        return item


def _full(photo: Photo) -> Box:
    return (0.0, 0.0, float(photo.image.width), float(photo.image.height))


def _tiles(photo: Photo, grid: int) -> list[Box]:
    """A ``grid`` x ``grid`` split of the centred square inset to 80% (room for shifts)."""
    w, h = photo.image.size
    side = 0.8 * min(w, h)
    x0, y0 = (w - side) / 2, (h - side) / 2
    step = side / grid
    return [
        (x0 + c * step, y0 + r * step, x0 + (c + 1) * step, y0 + (r + 1) * step)
        for r in range(grid)
        for c in range(grid)
    ]


def _random_box(photo: Photo, rng: np.random.Generator) -> Box:
    """A random crop covering 15-70% of the photo's area, aspect 0.6-1.6."""
    w, h = photo.image.size
    area = rng.uniform(0.15, 0.7) * w * h
    aspect = rng.uniform(0.6, 1.6)
    cw, ch = min(w, np.sqrt(area * aspect)), min(h, np.sqrt(area / aspect))
    x0, y0 = rng.uniform(0, w - cw), rng.uniform(0, h - ch)
    return (float(x0), float(y0), float(x0 + cw), float(y0 + ch))


def _write_originals(out: _Writer, photos: list[Photo], rng: np.random.Generator) -> None:
    """Originals in the corpus plus their edited queries, full size and low-res."""
    for photo in photos:
        box = _full(photo)
        source = out.add(
            photo.image,
            id=f"orig-{photo.name}",
            role="corpus",
            subset="hires",
            photo=photo.name,
            box=box,
            transform="original",
            target=None,
        )
        for name, transform in HIRES_TRANSFORMS.items():
            out.add(
                transform(photo.image, rng),
                id=f"q-{name}-{photo.name}",
                role="query",
                subset="hires",
                photo=photo.name,
                box=box,
                transform=name,
                target=source.id,
            )
        for t, tile in enumerate(_tiles(photo, 2)):
            size = int(rng.choice(LOWRES_SIZES))
            tile_id = f"lrorig-{photo.name}-{t}"
            out.add(
                render_region(photo.image, tile, size),
                id=tile_id,
                role="corpus",
                subset="lowres",
                photo=photo.name,
                box=tile,
                transform="original",
                target=None,
            )
            for name, edit in LOWRES_EDITS.items():
                image = apply_lowres_edit(photo.image, tile, size, edit, rng)
                out.add(
                    image,
                    id=f"q-{name}-{photo.name}-{t}",
                    role="query",
                    subset="lowres",
                    photo=photo.name,
                    box=tile,
                    transform=name,
                    target=tile_id,
                )


def _write_distractors(out: _Writer, photos: list[Photo], rng: np.random.Generator) -> None:
    """Unrelated photos, random crops of them, their low-res tiles, and LFW faces."""
    for photo in photos:
        box = _full(photo)
        out.add(
            photo.image,
            id=f"dis-{photo.name}",
            role="corpus",
            subset="hires",
            photo=photo.name,
            box=box,
            transform="distractor",
            target=None,
        )
        for k in range(DISTRACTOR_CROPS):
            crop = _random_box(photo, rng)
            long_side = int(rng.integers(96, 512))
            scale = long_side / max(crop[2] - crop[0], crop[3] - crop[1])
            crop_size = (
                max(8, round((crop[2] - crop[0]) * scale)),
                max(8, round((crop[3] - crop[1]) * scale)),
            )
            image = photo.image.resize(crop_size, Image.Resampling.LANCZOS, box=crop)
            out.add(
                image,
                id=f"dis-{photo.name}-crop{k}",
                role="corpus",
                subset="hires",
                photo=photo.name,
                box=crop,
                transform="distractor_crop",
                target=None,
            )
        for t, tile in enumerate(_tiles(photo, 3)):
            tile_px = int(rng.choice(LOWRES_SIZES))
            out.add(
                render_region(photo.image, tile, tile_px),
                id=f"lrdis-{photo.name}-{t}",
                role="corpus",
                subset="lowres",
                photo=photo.name,
                box=tile,
                transform="distractor",
                target=None,
            )
        for k in range(4):
            crop = _random_box(photo, rng)
            square_side = min(max(crop[2] - crop[0], crop[3] - crop[1]), *photo.image.size)
            x0 = min(crop[0], photo.image.width - square_side)
            y0 = min(crop[1], photo.image.height - square_side)
            square = (x0, y0, x0 + square_side, y0 + square_side)
            tile_px = int(rng.choice(LOWRES_SIZES))
            out.add(
                render_region(photo.image, square, tile_px),
                id=f"lrdis-{photo.name}-crop{k}",
                role="corpus",
                subset="lowres",
                photo=photo.name,
                box=square,
                transform="distractor_crop",
                target=None,
            )
    for k, face in enumerate(lfw_faces()):
        image = Image.fromarray(face, "L").resize((32, 32), Image.Resampling.BICUBIC)
        out.add(
            image,
            id=f"lrdis-lfw-{k}",
            role="corpus",
            subset="lowres",
            photo=f"lfw-{k}",
            box=None,
            transform="distractor_lfw",
            target=None,
        )


def _write_probes(out: _Writer, photos: list[Photo]) -> None:
    """Two disjoint halves (left 45%, right 45%) of every photo: same scene, no shared pixels."""
    for photo in photos:
        w, h = photo.image.size
        for side, box in (
            ("left", (0.0, 0.0, 0.45 * w, float(h))),
            ("right", (0.55 * w, 0.0, float(w), float(h))),
        ):
            image = photo.image.crop((round(box[0]), round(box[1]), round(box[2]), round(box[3])))
            out.add(
                image,
                id=f"probe-{photo.name}-{side}",
                role="probe",
                subset="semantic",
                photo=photo.name,
                box=box,
                transform=side,
                target=None,
            )


def build_dataset(root: Path, seed: int = 0) -> Dataset:
    """Write the benchmark under ``root`` (deterministic for a seed) and return it."""
    rng = np.random.default_rng(seed)
    photos = collect_photos()
    if len(photos) < 8:
        raise RuntimeError(
            f"only {len(photos)} offline photos found; install scikit-image / darknet"
        )
    order = rng.permutation(len(photos))
    originals = [photos[i] for i in sorted(order[:N_ORIGINALS])]
    distractors = [photos[i] for i in sorted(order[N_ORIGINALS:])]
    out = _Writer(root)
    _write_originals(out, originals, rng)
    _write_distractors(out, distractors, rng)
    _write_probes(out, photos)
    manifest = {"version": DATASET_VERSION, "seed": seed, "items": [asdict(i) for i in out.items]}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    log.info("benchmark written: %d images under %s", len(out.items), root)
    return Dataset(root, tuple(out.items))


def dataset_root(cache: Path, seed: int) -> Path:
    """The cache folder of the benchmark of ``seed`` (``accuracy/seed<N>``): each seed keeps its
    own images and feature tables, so runs of two seeds never rebuild over each other's."""
    return cache / "accuracy" / f"seed{seed}"


def load_dataset(root: Path, seed: int = 0) -> Dataset:
    """The cached benchmark under ``root``, rebuilt if missing or built by another recipe."""
    manifest_path = root / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("version") == DATASET_VERSION and manifest.get("seed") == seed:
            items = []
            for raw in manifest["items"]:
                box = tuple(raw.pop("box")) if raw.get("box") is not None else None
                items.append(Item(box=box, **{k: v for k, v in raw.items() if k != "box"}))  # type: ignore[arg-type]
            return Dataset(root, tuple(items))
    return build_dataset(root, seed)
