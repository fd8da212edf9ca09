"""Geometry of the UI's inline-SVG charts (per-label bars, score histograms); templates draw them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from splitaudit.indexer.kinds import MATCH_KINDS

STACK_ORDER = MATCH_KINDS


@dataclass(frozen=True)
class Bar:
    """One label's row: flagged of items, drawn as a bar of length ``rate``."""

    label: str
    flagged: int
    items: int
    rate: float
    y: float
    width: float


@dataclass(frozen=True)
class BarChart:
    """Per-label flagged-rate bars (the labels with most flagged images first)."""

    bars: tuple[Bar, ...]
    hidden: int
    width: int
    height: int
    label_width: int
    bar_area: int
    row_height: int


def label_bar_chart(
    by_label: Mapping[str, Mapping[str, Any]],
    *,
    limit: int = 40,
    width: int = 640,
    row_height: int = 22,
    label_width: int = 170,
) -> BarChart:
    """Bars of the flagged rate per label, at most ``limit`` (most flagged first)."""
    rows = sorted(
        (
            (str(label), int(v.get("flagged", 0)), int(v.get("items", 0)))
            for label, v in by_label.items()
        ),
        key=lambda r: (-r[1], -(r[1] / r[2] if r[2] else 0.0), r[0]),
    )
    shown = rows[:limit]
    bar_area = width - label_width - 110
    bars = tuple(
        Bar(
            label=label,
            flagged=flagged,
            items=items,
            rate=(flagged / items if items else 0.0),
            y=i * row_height,
            width=round(bar_area * (flagged / items if items else 0.0), 1),
        )
        for i, (label, flagged, items) in enumerate(shown)
    )
    return BarChart(
        bars=bars,
        hidden=len(rows) - len(shown),
        width=width,
        height=max(1, len(bars)) * row_height + 4,
        label_width=label_width,
        bar_area=bar_area,
        row_height=row_height,
    )


@dataclass(frozen=True)
class Segment:
    """The part of a histogram bar that counts one kind."""

    kind: str
    count: int
    y: float
    height: float


@dataclass(frozen=True)
class HistBar:
    """One histogram bin, stacked by kind."""

    x: float
    width: float
    lo: float
    hi: float
    total: int
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class Marker:
    """A threshold drawn as a vertical line, its text on the side with room."""

    x: float
    name: str
    text: str
    anchor: str = "start"


@dataclass(frozen=True)
class Tick:
    """An axis tick."""

    pos: float
    text: str


@dataclass(frozen=True)
class Histogram:
    """A histogram of match scores with thresholds marked."""

    title: str
    axis: str
    bars: tuple[HistBar, ...]
    markers: tuple[Marker, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    total: int
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int


def histogram(
    counts: Mapping[tuple[int, str], int],
    *,
    start: int,
    stop: int,
    step: int,
    scale: float,
    markers: Sequence[tuple[float, str, str]],
    title: str,
    axis: str,
    digits: int = 2,
    width: int = 640,
    height: int = 220,
) -> Histogram:
    """Bins of ``step`` units over ``[start, stop)`` (a value's unit is its bucket; ``unit * scale`` is shown).

    ``markers`` are ``(position in units, name, text)``. Buckets outside the range are clamped
    into the first or last bin so no match is lost from the picture.
    """
    left, top, right, bottom = 44, 12, 12, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    nbins = max(1, -(-(stop - start) // step))
    per_bin: list[dict[str, int]] = [{} for _ in range(nbins)]
    for (unit, kind), n in counts.items():
        i = min(max((unit - start) // step, 0), nbins - 1)
        per_bin[i][kind] = per_bin[i].get(kind, 0) + n
    peak = max((sum(b.values()) for b in per_bin), default=0)
    span = nbins * step

    def x_of(unit: float) -> float:
        return round(left + (unit - start) / span * plot_w, 2)

    bars = []
    for i, kinds in enumerate(per_bin):
        total = sum(kinds.values())
        if not total:
            continue
        y_base = float(top + plot_h)
        segments = []
        for kind in STACK_ORDER:
            n = kinds.get(kind, 0)
            if not n:
                continue
            h = round(plot_h * n / peak, 2)
            y_base -= h
            segments.append(Segment(kind=kind, count=n, y=round(y_base, 2), height=h))
        lo_unit = start + i * step
        bars.append(
            HistBar(
                x=x_of(lo_unit) + 0.5,
                width=max(round(plot_w / nbins - 1, 2), 1.0),
                lo=round(lo_unit * scale, 4),
                hi=round((lo_unit + step) * scale, 4),
                total=total,
                segments=tuple(segments),
            )
        )
    tick_every = _nice_step(span, 10)
    first = -(-start // tick_every) * tick_every
    x_ticks = tuple(
        Tick(pos=x_of(u), text=_tick_text(u * scale, digits))
        for u in range(first, start + span + 1, tick_every)
    )
    y_ticks = (
        (Tick(pos=float(top + plot_h), text="0"), Tick(pos=float(top), text=f"{peak:,}"))
        if peak
        else ()
    )
    marks = []
    for pos, name, text in markers:
        x = x_of(min(max(pos, start), start + span))
        marks.append(
            Marker(x=x, name=name, text=text, anchor="end" if x > left + 0.6 * plot_w else "start")
        )
    return Histogram(
        title=title,
        axis=axis,
        bars=tuple(bars),
        markers=tuple(marks),
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        total=sum(counts.values()),
        width=width,
        height=height,
        left=left,
        top=top,
        plot_width=plot_w,
        plot_height=plot_h,
    )


def _nice_step(span: int, most: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50... units giving at most ``most`` ticks over ``span``."""
    step = 1
    while span / step > most:
        for factor in (2, 2.5, 2):
            step = int(step * factor)
            if span / step <= most:
                break
    return step


def _tick_text(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


# What each cosine threshold does, as its line's label (``n`` its name, ``v`` its value).
COSINE_MARKERS = {
    "semantic_cosine": "{n} ≥ {v:g}",
    "near_cosine": "{n} ≥ {v:g}: geometric check forced",
    "candidate_cosine": "{n} ≥ {v:g}",
}


def cosine_histogram(
    counts: Mapping[tuple[int, str], int], thresholds: Mapping[str, Any]
) -> Histogram:
    """Cosine similarities of visual matches, with the cosine thresholds marked.

    Cosine alone never makes a pair near, so ``near_cosine`` is not drawn as a "near" line:
    it is labelled for what it does, the cosine from which the geometric match always runs.
    """
    marks = [
        (float(thresholds[n]) * 100, n, label.format(n=n, v=float(thresholds[n])))
        for n, label in COSINE_MARKERS.items()
        if n in thresholds
    ]
    lowest = min([u for u, _k in counts] + [m[0] for m in marks] + [90.0])
    start = max(-100, int(lowest // 5 * 5))
    step = 1 if 100 - start <= 50 else 2
    return histogram(
        counts,
        start=start,
        stop=100,
        step=step,
        scale=0.01,
        markers=marks,
        title="Cosine similarity of matched pairs",
        axis="cosine",
    )


def hamming_histogram(
    counts: Mapping[tuple[int, str], int], thresholds: Mapping[str, Any]
) -> Histogram:
    """pHash Hamming distances of visual matches, with the Hamming thresholds marked."""
    names = ("phash_hamming", "candidate_hamming")
    # "<= t" includes bin t, so the line sits on its right edge.
    marks = [
        (int(thresholds[n]) + 1, n, f"{n} ≤ {int(thresholds[n])}") for n in names if n in thresholds
    ]
    highest = max([u for u, _k in counts] + [m[0] for m in marks] + [8])
    stop = min(65, highest + 2)
    return histogram(
        counts,
        start=0,
        stop=stop,
        step=1,
        scale=1.0,
        markers=marks,
        digits=0,
        title="pHash Hamming distance of matched pairs",
        axis="Hamming distance (bits)",
    )
