"""Cosine thresholds for an embedding model, derived from a corpus: null pairs vs synthetic copies.

Two curves, both measured with the corpus's own model:

- **null**: cosines of unrelated pairs: random pairs of distinct (large) corpus items, plus
  synthetic copies against *other* sampled images (an edited test image against corpus
  images of other scenes). Duplicates are a vanishing share of random pairs;
- **copy**: cosines between a sample of corpus images and synthetic edits of them (``EDITS``:
  resize, JPEG, crop 90 / 70 %, flip, colour, border, text), the edits the near tier exists for.

An audit compares every test image with its corpus neighbours, so the "unrelated" ceiling
must hold far out in the tail, not at the sample's own maximum (a few thousand pairs). The
ceiling is the null cosine reached once per ``NULL_TAIL_PAIRS`` pairs, from a normal fit to
the upper half: ``median + (q99 - median) * z(1/NULL_TAIL_PAIRS) / z(0.01)`` (never below
the sample's ``q0.999``). On the bench photos this gives 0.63 for efficientnet-lite0, where
``bench.accuracy`` found 0.667 as the highest unrelated cosine among 600,000 pairs.

The cosines are then chosen with the margins ``docs/thresholds.md`` uses for
efficientnet-lite0 (0.667 highest unrelated -> near 0.80, semantic 0.70, candidate 0.50):

- ``near_cosine`` = ceiling + ``NEAR_MARGIN`` (0.13), but never more than half the way from the
  ceiling to 1 (CLIP-class models put unrelated photos at 0.8+ and copies at 0.95+);
- ``semantic_cosine`` = ceiling + a quarter of that gap (the lowest value clearly above
  every unrelated pair);
- ``candidate_cosine`` (a cost filter in front of pixel verification) = the lower of the
  copies' ``COPY_LOW_Q`` quantile and ``semantic_cosine - CANDIDATE_BELOW_SEMANTIC``, so
  nearly every synthetic copy is looked at.

Values are rounded to 0.01 (up for near / semantic, down for candidate).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageDraw, ImageEnhance, ImageFont, ImageOps

from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.match.thresholds import LITERATURE_CLIP, LITERATURE_SOURCES, Thresholds

ThresholdSource = Literal["measured", "calibrated", "literature"]

NULL_TAIL_PAIRS = 1_000_000
NULL_FLOOR_Q = 0.999
_Z_TAIL = 4.753424  # standard normal z of 1e-6 (scipy.stats.norm.isf(1 / NULL_TAIL_PAIRS))
_Z_99 = 2.326348  # z of 0.01
NEAR_MARGIN = 0.13
COPY_LOW_Q = 0.02
CANDIDATE_BELOW_SEMANTIC = 0.20
NULL_QUANTILES = (0.5, 0.9, 0.99, 0.999, 0.9999)
COPY_QUANTILES = (0.01, 0.02, 0.05, 0.1, 0.5)
# below this many unrelated pairs the null curve is too thin to choose from
MIN_NULL_PAIRS = 100

Edit = Callable[[Image.Image], Image.Image]


def _resize_50(img: Image.Image) -> Image.Image:
    return img.resize((max(1, img.width // 2), max(1, img.height // 2)), Image.Resampling.BILINEAR)


def _jpeg_40(img: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=40)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def _crop(fraction: float) -> Edit:
    def crop(img: Image.Image) -> Image.Image:
        w, h = max(1, round(img.width * fraction)), max(1, round(img.height * fraction))
        left, top = (img.width - w) // 2, (img.height - h) // 2
        return img.crop((left, top, left + w, top + h))

    return crop


def _flip(img: Image.Image) -> Image.Image:
    return ImageOps.mirror(img)


def _colour(img: Image.Image) -> Image.Image:
    return ImageEnhance.Brightness(ImageEnhance.Color(img).enhance(1.5)).enhance(1.15)


def _border(img: Image.Image) -> Image.Image:
    return ImageOps.expand(img, border=max(1, round(0.12 * min(img.size))), fill=(200, 40, 40))


def _text(img: Image.Image) -> Image.Image:
    out = img.copy()
    size = max(8, min(img.size) // 8)
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default(size=size)
    draw.text(
        (size // 2, img.height - 2 * size),
        "SAMPLE 2024",
        fill=(255, 255, 255),
        font=font,
        stroke_width=max(1, size // 12),
        stroke_fill=(0, 0, 0),
    )
    return out


EDITS: dict[str, Edit] = {
    "resize_50": _resize_50,
    "jpeg_q40": _jpeg_40,
    "crop_90": _crop(0.9),
    "crop_70": _crop(0.7),
    "hflip": _flip,
    "colour": _colour,
    "border": _border,
    "text": _text,
}


@dataclass(frozen=True)
class ThresholdCalibration:
    """A corpus's cosine thresholds for its model, where they came from, and the figures behind them."""

    source: ThresholdSource
    model_id: str
    near_cosine: float
    semantic_cosine: float
    candidate_cosine: float
    corpus_count: int = 0
    null_pairs: int = 0
    null_items: int = 0
    null_quantiles: dict[str, float] = field(default_factory=dict)
    copy_images: int = 0
    copy_pairs: int = 0
    copy_quantiles: dict[str, float] = field(default_factory=dict)
    copy_by_edit: dict[str, float] = field(default_factory=dict)
    note: str = ""
    seconds: float = 0.0

    def apply(self, base: Thresholds) -> Thresholds:
        """``base`` with this calibration's cosines (hash and verification thresholds kept)."""
        return replace(
            base,
            near_cosine=self.near_cosine,
            semantic_cosine=self.semantic_cosine,
            candidate_cosine=self.candidate_cosine,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the corpus's thresholds sidecar, reports)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ThresholdCalibration:
        """Read ``to_dict`` back (unknown keys from newer versions are ignored)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in names})

    def summary(self) -> str:
        """One line for people: the three cosines and where they came from."""
        head = (
            f"near {self.near_cosine:.2f}, semantic {self.semantic_cosine:.2f}, "
            f"candidate {self.candidate_cosine:.2f}"
        )
        if self.source == "measured":
            return f"{head} (measured by bench.accuracy)"
        if self.source == "literature":
            return f"{head} (literature starting values: {self.note})"
        return (
            f"{head} (calibrated on this corpus: {self.null_pairs} unrelated pairs from "
            f"{self.null_items} items, {self.copy_pairs} synthetic copies of {self.copy_images} images"
            + (f"; {self.note}" if self.note else "")
            + ")"
        )


def null_cosines(
    vectors: npt.NDArray[np.float32], pairs: int, rng: np.random.Generator
) -> npt.NDArray[np.float32]:
    """Cosines of up to ``pairs`` random pairs of distinct rows (all pairs when fewer exist)."""
    n = len(vectors)
    if n < 2:
        return np.zeros(0, np.float32)
    total = n * (n - 1) // 2
    if total <= pairs:
        upper = np.triu_indices(n, k=1)
        return np.einsum("ij,ij->i", vectors[upper[0]], vectors[upper[1]]).astype(np.float32)
    a = rng.integers(0, n, pairs)
    b = (a + rng.integers(1, n, pairs)) % n  # never equal to a
    return np.einsum("ij,ij->i", vectors[a], vectors[b]).astype(np.float32)


@dataclass(frozen=True)
class CopyCurves:
    """Cosines of synthetic copies to their originals (per edit), and of copies to *other* originals."""

    copies: dict[str, npt.NDArray[np.float32]]
    cross: npt.NDArray[np.float32]
    images: int


def copy_cosines(
    embedder: Embedder, images: Sequence[Image.Image], batch: int = 64, cross_per_edit: int = 4096
) -> CopyCurves:
    """Embed ``images`` and their ``EDITS`` with ``embedder``; cosines to the same / other originals.

    The cross cosines (an edited image against an unrelated original) are null pairs of the
    kind an audit sees: an edited test image against corpus images of other scenes.
    """
    rgb = [img.convert("RGB") for img in images]
    originals = _embed(embedder, rgb, batch)
    n = len(rgb)
    rng = np.random.default_rng(0)
    copies: dict[str, npt.NDArray[np.float32]] = {}
    cross: list[npt.NDArray[np.float32]] = []
    for name, edit in EDITS.items():
        edited = _embed(embedder, [edit(img) for img in rgb], batch)
        copies[name] = np.einsum("ij,ij->i", originals, edited).astype(np.float32)
        if n > 1:
            sims = edited @ originals.T
            off = ~np.eye(n, dtype=bool)
            values = sims[off]
            if len(values) > cross_per_edit:
                values = rng.choice(values, cross_per_edit, replace=False)
            cross.append(values.astype(np.float32))
    return CopyCurves(
        copies=copies, cross=np.concatenate(cross) if cross else np.zeros(0, np.float32), images=n
    )


def _embed(embedder: Embedder, images: list[Image.Image], batch: int) -> npt.NDArray[np.float32]:
    parts = [embedder.embed(images[i : i + batch]) for i in range(0, len(images), batch)]
    return np.concatenate(parts) if parts else np.zeros((0, embedder.dim), np.float32)


def _quantiles(values: npt.NDArray[np.float32], qs: Sequence[float]) -> dict[str, float]:
    out = {f"q{q:g}": round(float(np.quantile(values, q)), 4) for q in qs}
    out["min"], out["max"] = round(float(values.min()), 4), round(float(values.max()), 4)
    return out


def _up(x: float) -> float:
    return min(1.0, math.ceil(round(x * 100, 6)) / 100)


def _down(x: float) -> float:
    return max(-1.0, math.floor(round(x * 100, 6)) / 100)


def null_ceiling(null: npt.NDArray[np.float32]) -> float:
    """The unrelated-pair cosine reached once per ``NULL_TAIL_PAIRS`` pairs (module docstring)."""
    median, q99, floor = (float(v) for v in np.quantile(null, [0.5, 0.99, NULL_FLOOR_Q]))
    return min(0.999, max(floor, median + (q99 - median) * _Z_TAIL / _Z_99))


def choose_cosines(
    null: npt.NDArray[np.float32], copies: npt.NDArray[np.float32]
) -> tuple[float, float, float]:
    """(near, semantic, candidate) cosines from the null and copy curves (module docstring)."""
    ceiling = null_ceiling(null)
    gap = min(NEAR_MARGIN, (1.0 - ceiling) / 2)
    near = _up(ceiling + gap)
    semantic = min(near, _up(ceiling + gap / 4))
    low_copy = float(np.quantile(copies, COPY_LOW_Q))
    candidate = min(semantic, _down(min(low_copy, semantic - CANDIDATE_BELOW_SEMANTIC)))
    return near, semantic, candidate


def calibrate_from_curves(
    model_id: str,
    corpus_pairs: npt.NDArray[np.float32],
    curves: CopyCurves,
    *,
    corpus_count: int,
    null_items: int,
) -> ThresholdCalibration:
    """A ``calibrated`` record from random corpus pairs and the copy curves (sizes checked by the caller)."""
    null = np.concatenate([corpus_pairs, curves.cross])
    every = np.concatenate(list(curves.copies.values()))
    near, semantic, candidate = choose_cosines(null, every)
    quantiles = _quantiles(null, NULL_QUANTILES)
    quantiles["ceiling"] = round(null_ceiling(null), 4)
    mid_copy = float(np.median(every))
    note = (
        f"copies are not separable from unrelated pairs under this model or corpus (half of the "
        f"copies below {mid_copy:.3f}, unrelated ceiling {quantiles['ceiling']:.3f}): its cosine "
        "tiers find little; hashes and pixel verification still do"
        if mid_copy <= quantiles["ceiling"]
        else ""
    )
    return ThresholdCalibration(
        source="calibrated",
        model_id=model_id,
        near_cosine=near,
        semantic_cosine=semantic,
        candidate_cosine=candidate,
        corpus_count=corpus_count,
        null_pairs=len(null),
        null_items=null_items,
        null_quantiles=quantiles,
        copy_images=curves.images,
        copy_pairs=len(every),
        copy_quantiles=_quantiles(every, COPY_QUANTILES),
        copy_by_edit={k: round(float(np.median(v)), 4) for k, v in curves.copies.items()},
        note=note,
    )


def literature_calibration(
    model_id: str, *, corpus_count: int, reason: str
) -> ThresholdCalibration:
    """ViT-B/32-class CLIP starting values (``LITERATURE_SOURCES``), for corpora that cannot calibrate."""
    return ThresholdCalibration(
        source="literature",
        model_id=model_id,
        corpus_count=corpus_count,
        note=f"{reason}; sources: {'; '.join(LITERATURE_SOURCES)}",
        near_cosine=LITERATURE_CLIP["near_cosine"],
        semantic_cosine=LITERATURE_CLIP["semantic_cosine"],
        candidate_cosine=LITERATURE_CLIP["candidate_cosine"],
    )


def measured_calibration(
    model_id: str, thresholds: Thresholds, *, corpus_count: int
) -> ThresholdCalibration:
    """The record for a model whose thresholds ``bench.accuracy`` measured."""
    return ThresholdCalibration(
        source="measured",
        model_id=model_id,
        near_cosine=thresholds.near_cosine,
        semantic_cosine=thresholds.semantic_cosine,
        candidate_cosine=thresholds.candidate_cosine,
        corpus_count=corpus_count,
        note="docs/thresholds.md",
    )
