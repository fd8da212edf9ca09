"""Uniform borders a copy gained (a frame, letterbox or pillarbox bars), cut off before the
pixel verifier's thumbnail is made.

A copy re-posted inside a plain frame shows the whole picture a little smaller and off its
edges. The verifier searches zooms and shifts for that, but on smooth pictures its score is
normalised by how well the picture matches itself moved 2 px (close to 1), so the slight
misfit of its nearest zoom step costs most of the score: of ``bench.dedup_photos``' 534
copies in a 4-px black frame around a 256-px tile (``--originals 2000``), a tenth scored
under 0.62 against their source and 14% under the 0.70 that makes a large pair near (median
0.92). Cut along the frame both images show the same picture: median 0.999, 98.9% at 0.70.

Only a border a copy is likely to have gained is cut: on two *opposite* sides at once (a
frame, letterbox bars top and bottom, pillarbox bars left and right), both sides of the same
colour, each line of the band within ``TOLERANCE`` grey levels of it, each band at most
``MAX_SHARE`` of the side. A picture that is plain all over, or plain along one edge only (a
white sky above a beach), keeps its edges. The border is looked for with the short side
reduced to ~``PROBE_SIDE`` px, so a copy at half or twice the size gets the same cut. Images
of at most ``MIN_SIDE`` px on their short side (the 32-64 px thumbnails of CIFAR or
Tiny-ImageNet) are never cut: they are aligned on their own pixels (``low_res_align``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from PIL import Image

TOLERANCE = 10  # grey levels a border line may differ from its colour (JPEG noise, a soft edge)
MAX_SHARE = 0.25  # of the side, per band: letterbox bars of 16:9 shown in 4:3 take 12.5%
PROBE_SIDE = 64  # px of the short side the border is looked for at (JPEG noise averaged out)
MIN_SIDE = 64  # px: images this small on their short side (thumbnails) keep their border

Box = tuple[int, int, int, int]  # left, top, right, bottom (PIL's crop box)


def _band(lines: npt.NDArray[np.int16], colour: float) -> int:
    """How many of ``lines`` (rows, outermost first) lie within ``TOLERANCE`` of ``colour``."""
    plain = np.abs(lines - colour).max(axis=1) <= TOLERANCE
    return int(plain.argmin()) if not plain.all() else len(plain)


def _bands(pixels: npt.NDArray[np.int16]) -> tuple[int, int]:
    """The plain bands at the first and last rows of ``pixels``, or (0, 0) where they are not
    a border: either missing, of different colours, or wider than ``MAX_SHARE``."""
    first, last = float(np.median(pixels[0])), float(np.median(pixels[-1]))
    if abs(first - last) > TOLERANCE:
        return 0, 0
    top, bottom = _band(pixels, first), _band(pixels[::-1], last)
    limit = MAX_SHARE * len(pixels)
    if not top or not bottom or top > limit or bottom > limit:
        return 0, 0
    return top, bottom


def border_box(gray: npt.NDArray[np.uint8]) -> Box | None:
    """The box inside the uniform border of a grayscale image, or None where it has none."""
    pixels = gray.astype(np.int16)
    height, width = pixels.shape
    top, bottom = _bands(pixels)
    left, right = _bands(pixels.T)
    if not (top or left):
        return None
    return left, top, width - right, height - bottom


def inner_box(gray: npt.NDArray[np.uint8]) -> Box | None:
    """The box inside the uniform border of a grayscale image of any size, in its pixels,
    looked for at ``PROBE_SIDE`` px (so a copy at another size gets the same verdict); None
    where it has none. Callers leave images of at most ``MIN_SIDE`` px as they are."""
    height, width = gray.shape
    factor = max(1, min(height, width) // PROBE_SIDE)
    probe = gray if factor == 1 else np.asarray(Image.fromarray(gray).reduce(factor))
    box = border_box(probe)
    if box is None:
        return None
    left, top, right, bottom = box
    probe_h, probe_w = probe.shape
    top, left = top * factor, left * factor
    # bands take at most MAX_SHARE of each side, so the box keeps at least half of each
    return left, top, width - (probe_w - right) * factor, height - (probe_h - bottom) * factor


def without_border(gray: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A grayscale image without its uniform border (``inner_box``; as it is without one, or
    at most ``MIN_SIDE`` px on its short side)."""
    box = None if min(gray.shape) <= MIN_SIDE else inner_box(gray)
    if box is None:
        return gray
    left, top, right, bottom = box
    return gray[top:bottom, left:right]
