"""``python -m bench.screen_photos``: a corpus photo shown on a screen and photographed (issue 23).

Issue 23 asks for a corpus image inside a larger test image — a screenshot, a collage, a slide,
*a photo of a screen* — to be near. ``bench.recall``'s insets are pasted upright; a photo of a
monitor shows the picture in perspective. This bench builds that case from the offline photos
(``bench.accuracy.photos``): two thirds of them indexed, with desktop wallpapers as filler
(``bench.distractors``); each indexed photo letterboxed into a 16:10 screen with a dark bezel,
turned by a yaw and a pitch (a pinhole camera at 1.2 screen widths), put on a blurred, darkened
wallpaper (the room) at 35 / 50 / 70% of the 1280 x 960 canvas's width, gained and tinted, blurred by
1 px, with sensor noise and JPEG at quality 75. The held-out third goes through the same
screens as negatives that must match nothing.

It audits the split through the CLI (``splitaudit index`` / ``audit --json``, in-process) and
prints recall by screen share and by yaw, the false positives, and for each miss what the
geometric step alone makes of the pair (``geometry.geometric_match``: inliers of the
similarity fit and the content check), so a miss reads as *no candidate* or *no fit*.

    python -m bench.screen_photos --max-yaw 30 --copies 3
    python -m bench.screen_photos --max-yaw 0     # the same screens seen head-on (control)
    python -m bench.screen_photos --library /tmp/before   # another checkout's library
    python -m bench.screen_photos --shot-side 360   # the same screens at web size (480 x 360)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from bench.images import at_shorter_side
from bench.library import cli_in_process, use_library

CACHE = Path(__file__).resolve().parent / ".cache" / "screen_photos"
CANVAS = (1280, 960)
SHARES = (0.35, 0.5, 0.7)  # the screen's width, of the canvas's
SCREEN_ASPECT = 16 / 10
BEZEL = 0.04  # of the screen's width
FOCAL = 1.2  # camera distance, in screen widths
FILLER = 40  # wallpapers indexed beside the photos
KEY = re.compile(r"screen/(?P<name>.+)-s(?P<share>\d+)-y(?P<yaw>-?\d+)-p(?P<pitch>-?\d+)-\d+\.jpg")


@dataclass(frozen=True)
class Shot:
    """The photo of the screen, and where the monitor's and the shown photo's corners landed
    on it (4 x 2 canvas px, clockwise from top-left)."""

    image: Image.Image
    corners: np.ndarray
    photo: np.ndarray

    @property
    def photo_box(self) -> tuple[float, float, float, float]:
        """The shown photo's bounding box, as fractions of the canvas."""
        (x0, y0), (x1, y1) = self.photo.min(axis=0), self.photo.max(axis=0)
        w, h = CANVAS
        return (float(x0) / w, float(y0) / h, float(x1) / w, float(y1) / h)


def screen_quad(width: int, height: int, yaw: float, pitch: float) -> np.ndarray:
    """The corners (4 x 2, clockwise from top-left) of a ``width`` x ``height`` screen turned by
    ``yaw`` and ``pitch`` degrees and seen by a pinhole camera ``FOCAL`` widths away, centred
    on the origin."""
    f = FOCAL * width
    cy, sy = math.cos(math.radians(yaw)), math.sin(math.radians(yaw))
    cp, sp = math.cos(math.radians(pitch)), math.sin(math.radians(pitch))
    out = []
    for x, y in ((0, 0), (width, 0), (width, height), (0, height)):
        px, py, pz = x - width / 2, y - height / 2, 0.0
        px, pz = cy * px + sy * pz, -sy * px + cy * pz
        py, pz = cp * py - sp * pz, sp * py + cp * pz
        pz += f
        out.append((f * px / pz, f * py / pz))
    return np.asarray(out, np.float32)


def smooth_room(seed: int = 0) -> Image.Image:
    """A smooth, coloured backdrop the size of the canvas (a blurred room, for tests: no
    wallpaper packages needed)."""
    small = np.random.default_rng(seed).uniform(40, 200, (6, 8, 3)).astype(np.uint8)
    return Image.fromarray(small).resize(CANVAS, Image.Resampling.BICUBIC)


def screen_photo(
    photo: Image.Image,
    room: Image.Image,
    share: float,
    yaw: float,
    pitch: float,
    rng: np.random.Generator,
) -> Shot:
    """``photo`` letterboxed on a screen ``share`` of the canvas wide, turned by ``yaw`` /
    ``pitch``, photographed in front of ``room`` (blurred, darkened): gain, tint, 1-px blur and
    noise (JPEG is the caller's, at save)."""
    import cv2

    w, h = CANVAS
    background = np.asarray(room.convert("RGB").resize(CANVAS).filter(ImageFilter.GaussianBlur(6)))
    sw = round(w * share)
    sh = round(sw / SCREEN_ASPECT)
    screen = np.zeros((sh, sw, 3), np.uint8)
    fit = min(sw / photo.width, sh / photo.height)
    pw, ph = max(8, round(photo.width * fit)), max(8, round(photo.height * fit))
    shown = np.asarray(photo.convert("RGB").resize((pw, ph), Image.Resampling.LANCZOS))
    screen[(sh - ph) // 2 : (sh - ph) // 2 + ph, (sw - pw) // 2 : (sw - pw) // 2 + pw] = shown
    bezel = round(sw * BEZEL)
    monitor = np.full((sh + 2 * bezel, sw + 2 * bezel, 3), 25, np.uint8)
    monitor[bezel : bezel + sh, bezel : bezel + sw] = screen
    mh, mw = monitor.shape[:2]
    corners = screen_quad(mw, mh, yaw, pitch)
    corners += np.float32([rng.uniform(0.4, 0.6) * w, rng.uniform(0.4, 0.6) * h])
    source = np.float32([[0, 0], [mw, 0], [mw, mh], [0, mh]])
    warp = cv2.getPerspectiveTransform(source, corners)
    x, y = bezel + (sw - pw) // 2, bezel + (sh - ph) // 2
    shown_at = np.float32([[[x, y], [x + pw, y], [x + pw, y + ph], [x, y + ph]]])
    photo_quad = cv2.perspectiveTransform(shown_at, warp)[0]
    warped = cv2.warpPerspective(monitor, warp, CANVAS, flags=cv2.INTER_LINEAR)
    mask = cv2.warpPerspective(np.ones((mh, mw), np.float32), warp, CANVAS)[..., None]
    tint = rng.uniform(0.8, 1.15) * rng.uniform(0.9, 1.1, 3)
    shot = background * 0.6 * (1 - mask) + warped.astype(np.float32) * tint * mask
    shot = cv2.GaussianBlur(shot, (0, 0), 1.0) + rng.normal(0, 3, shot.shape)
    return Shot(Image.fromarray(np.clip(shot, 0, 255).astype(np.uint8)), corners, photo_quad)


def build(root: Path, max_yaw: float, copies: int, seed: int, shot_side: int | None = None) -> None:
    """The corpus (photos and filler wallpapers) and the split (screens and held-out screens);
    ``shot_side``: every split image reduced to that shorter side (aspect kept)."""

    def sized(image: Image.Image) -> Image.Image:
        return image if shot_side is None else at_shorter_side(image, shot_side)

    from bench.accuracy.photos import collect_photos
    from bench.distractors import pool_images

    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(seed)
    photos = collect_photos()
    order = rng.permutation(len(photos))
    photos = [photos[i] for i in order]
    indexed, held_out = photos[: len(photos) * 2 // 3], photos[len(photos) * 2 // 3 :]
    rooms = [image for _name, image in pool_images([p.image for p in photos])]
    if len(rooms) <= FILLER:
        raise SystemExit(
            f"bench.screen_photos needs more than {FILLER} wallpapers for filler and rooms, "
            f"found {len(rooms)}: install the packages bench.distractors names"
        )
    corpus, split = root / "corpus", root / "split"
    for folder in (corpus, split / "screen", split / "unrelated"):
        folder.mkdir(parents=True)
    for photo in indexed:
        photo.image.convert("RGB").save(corpus / f"{photo.name}.jpg", quality=92)
    for n, image in enumerate(rooms[:FILLER]):
        image.convert("RGB").resize((640, 400)).save(corpus / f"filler-{n:02d}.jpg", quality=90)
    backdrops = rooms[FILLER:]
    shots = 0
    for copy in range(copies):
        for n, photo in enumerate(indexed):
            share = SHARES[(n + copy) % len(SHARES)]
            yaw, pitch = rng.uniform(-max_yaw, max_yaw), rng.uniform(-max_yaw / 2, max_yaw / 2)
            room = backdrops[shots % len(backdrops)]
            shot = screen_photo(photo.image, room, share, yaw, pitch, rng)
            name = f"{photo.name}-s{round(share * 100)}-y{round(yaw)}-p{round(pitch)}-{copy}.jpg"
            sized(shot.image).save(split / "screen" / name, quality=75)
            shots += 1
    for n, photo in enumerate(held_out):
        share = SHARES[n % len(SHARES)]
        yaw, pitch = rng.uniform(-max_yaw, max_yaw), rng.uniform(-max_yaw / 2, max_yaw / 2)
        shot = screen_photo(photo.image, backdrops[n % len(backdrops)], share, yaw, pitch, rng)
        sized(shot.image).save(split / "unrelated" / f"{photo.name}.jpg", quality=75)


def tally(report: dict[str, Any]) -> dict[str, Any]:
    """Recall of the screens (near to their own photo) by share and by |yaw| band, false
    positives among the held-out screens, and the missed keys."""
    rows: list[tuple[int, int, bool, str]] = []
    false_positives: list[str] = []
    for item in report["items"]:
        near = [m for m in item["matches"] if m["kind"] == "near"]
        found = KEY.fullmatch(item["key"])
        if found is None:
            if near:
                false_positives.append(item["key"])
            continue
        own = any(m["corpus_key"].rsplit(".", 1)[0] == found["name"] for m in near)
        rows.append((int(found["share"]), abs(int(found["yaw"])), own, item["key"]))
    by_share = {
        share: _share([r for r in rows if r[0] == share]) for share in sorted({r[0] for r in rows})
    }
    bands = ((0, 10), (10, 20), (20, 91))
    by_yaw = {
        f"{lo}-{min(hi, 90)}": _share([r for r in rows if lo <= r[1] < hi]) for lo, hi in bands
    }
    return {
        "recall": _share(rows),
        "by_share": by_share,
        "by_yaw": by_yaw,
        "false_positives": false_positives,
        "negatives": sum(1 for item in report["items"] if KEY.fullmatch(item["key"]) is None),
        "missed": sorted(r[3] for r in rows if not r[2]),
    }


def _share(rows: list[tuple[int, int, bool, str]]) -> dict[str, Any]:
    hits = sum(1 for r in rows if r[2])
    return {"found": hits, "of": len(rows), "recall": round(hits / len(rows), 3) if rows else None}


def diagnose(root: Path, keys: list[str]) -> list[dict[str, Any]]:
    """What the geometric step alone makes of each missed screen and its own photo."""
    from splitaudit.indexer.match.geometry import geometric_match

    out = []
    for key in keys:
        found = KEY.fullmatch(key)
        assert found is not None
        with (
            Image.open(root / "split" / key) as test,
            Image.open(root / "corpus" / f"{found['name']}.jpg") as source,
        ):
            fit = geometric_match(test, source)
        content = fit.content
        out.append(
            {
                "key": key,
                "inliers": fit.inliers,
                "matches": fit.matches,
                "plausible": fit.plausible,
                "perspective": bool(getattr(fit, "perspective", ())),
                "content_agreement": None if content is None else round(content.score, 3),
                "content_passed": None if content is None else content.passed,
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-yaw", type=float, default=30.0, help="degrees (pitch: half)")
    parser.add_argument("--copies", type=int, default=3, help="screens per indexed photo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--library", type=Path, help="audit with this checkout's library")
    parser.add_argument(
        "--shot-side",
        type=int,
        help="every test image's shorter side, px (default: the 1280 x 960 canvas; e.g. 360)",
    )
    args = parser.parse_args(argv)
    if args.library:
        use_library(args.library)
    tag = "" if args.library is None else f"-{args.library.name}"
    tag += "" if args.shot_side is None else f"-side{args.shot_side}"
    root = CACHE / f"seed{args.seed}-yaw{args.max_yaw:g}-x{args.copies}{tag}"
    build(root, args.max_yaw, args.copies, args.seed, args.shot_side)
    home = root / "home"
    cli_in_process(
        "index", str(root / "corpus"), "--corpus", "screens", "--home", str(home),
        "--model", "efficientnet-lite0",
    )  # fmt: skip
    report_path = root / "audit.json"
    cli_in_process(
        "audit", str(root / "split"), "--corpus", "screens", "--home", str(home),
        "--json", str(report_path),
    )  # fmt: skip
    figures = tally(json.loads(report_path.read_text()))
    figures["misses"] = diagnose(root, figures.pop("missed"))
    figures["max_yaw"], figures["seed"] = args.max_yaw, args.seed
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
