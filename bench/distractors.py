"""Distractor thumbnails for ``bench.recall --distractors N``: a corpus the size users have.

A copy's source is found only if it is among the candidates the audit verifies: the ``TOP_K``
nearest corpus items by embedding and by pHash. In the recall bench's own corpus (~90
thumbnails) every source is; in a corpus of tens of thousands of thumbnails (a classification
dataset's training split), unrelated thumbnails outrank it. These are tiles of photos from a
pool *disjoint from the bench's own photos* (desktop wallpapers that Debian ships:
``apt-get install gnome-backgrounds mate-backgrounds ukui-wallpapers lomiri-wallpapers
plasma-workspace-wallpapers sway-backgrounds``), so no test image has a copy among them: a
match to one is a false positive.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

POOL_DIRS = (Path("/usr/share/backgrounds"), Path("/usr/share/wallpapers"))
PACKAGES = (
    "gnome-backgrounds mate-backgrounds ukui-wallpapers lomiri-wallpapers "
    "plasma-workspace-wallpapers sway-backgrounds"
)
MIN_SIDE = 400  # px: smaller pool images are icons or previews
WORK_SIDE = 1024  # pool images are shrunk to this longer side before tiles are cut
TILE_SHARE = (0.12, 0.5)  # a tile's side, as a share of the pool image's shorter side


def pool_images(avoid: Sequence[Image.Image] = ()) -> Iterator[tuple[str, Image.Image]]:
    """``(name, image)`` of each distinct photo-sized image of the pool, sorted by path; an
    image within ``DUPLICATE_RADIUS`` pHash bits of one of ``avoid`` (the bench's own photos)
    or of a pool image met already is left out."""
    from bench.accuracy.photos import DUPLICATE_RADIUS
    from splitaudit.indexer.features.perceptual import phash
    from splitaudit.indexer.popcount import popcount

    seen = [phash(image).value for image in avoid]
    paths = sorted(
        p
        for folder in POOL_DIRS
        if folder.is_dir()
        for p in folder.rglob("*")
        if p.suffix.lower() in (".jpg", ".jpeg", ".png")
    )
    for path in paths:
        try:
            with Image.open(path) as im:
                if min(im.size) < MIN_SIDE:
                    continue
                im.draft("RGB", (WORK_SIDE, WORK_SIDE))
                image = im.convert("RGB")
        except (OSError, ValueError) as exc:
            log.info("distractor pool: %s unreadable: %s", path, exc)
            continue
        scale = WORK_SIDE / max(image.size)
        if scale < 1:
            image = image.resize((round(image.width * scale), round(image.height * scale)))
        value = phash(image).value
        known = np.asarray(seen, np.uint64)
        if len(known) and popcount(known ^ np.uint64(value)).min() <= DUPLICATE_RADIUS:
            continue
        seen.append(value)
        yield path.stem, image


def write_distractors(
    folder: Path, count: int, sizes: tuple[int, ...], seed: int, avoid: Sequence[Image.Image]
) -> int:
    """Write ``count`` tiles (``d-NNNNN-SIZE.png``, sizes in turn) cut at random places and
    scales from the pool images, as evenly as the pool allows; the number written. Raises
    ``SystemExit`` with the install line when the pool is empty."""
    images = [image for _name, image in pool_images(avoid)]
    if not images:
        raise SystemExit(
            f"no distractor pool under {', '.join(map(str, POOL_DIRS))}: apt-get install {PACKAGES}"
        )
    rng = np.random.default_rng(seed + 1_000)
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        image = images[n % len(images)]
        w, h = image.size
        side = rng.uniform(*TILE_SHARE) * min(w, h)
        x0, y0 = rng.uniform(0, w - side), rng.uniform(0, h - side)
        size = sizes[n % len(sizes)]
        tile = image.resize(
            (size, size), Image.Resampling.LANCZOS, box=(x0, y0, x0 + side, y0 + side)
        )
        tile.save(folder / f"d-{n:05d}-{size}.png")
    log.warning("recall bench: %d distractor tiles from %d pool images", count, len(images))
    return count
