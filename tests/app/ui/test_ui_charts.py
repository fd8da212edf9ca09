"""Geometry of the inline-SVG charts: per-label bars and score histograms with thresholds."""

from __future__ import annotations

from collections import Counter

from splitaudit.app.ui.charts import cosine_histogram, hamming_histogram, histogram, label_bar_chart

THRESHOLDS = {
    "phash_hamming": 8,
    "near_cosine": 0.95,
    "semantic_cosine": 0.85,
    "candidate_hamming": 20,
    "candidate_cosine": 0.75,
}


def test_label_bars_put_the_most_flagged_first_and_cap_the_count() -> None:
    by_label = {f"l{i:02d}": {"items": 10, "flagged": i % 7} for i in range(50)}
    chart = label_bar_chart(by_label, limit=10)
    assert len(chart.bars) == 10 and chart.hidden == 40
    assert [b.flagged for b in chart.bars] == [6] * 7 + [5] * 3
    assert chart.bars[0].width == round(chart.bar_area * 0.6, 1)
    assert [b.y for b in chart.bars[:3]] == [0, chart.row_height, 2 * chart.row_height]


def test_label_bar_of_an_empty_label_has_zero_width() -> None:
    chart = label_bar_chart({"a": {"items": 0, "flagged": 0}, "b": {"items": 4, "flagged": 4}})
    assert [(b.label, b.width) for b in chart.bars] == [("b", float(chart.bar_area)), ("a", 0.0)]


def test_histogram_stacks_kinds_and_keeps_out_of_range_counts() -> None:
    counts = Counter(
        {(2, "exact"): 3, (2, "near"): 1, (5, "near"): 4, (99, "near"): 2, (-4, "near"): 1}
    )
    hist = histogram(
        counts,
        start=0,
        stop=10,
        step=1,
        scale=1.0,
        markers=[(9, "t", "t <= 8")],
        title="h",
        axis="x",
        digits=0,
    )
    assert hist.total == 11
    by_lo = {b.lo: b for b in hist.bars}
    assert sorted(by_lo) == [0.0, 2.0, 5.0, 9.0]
    assert by_lo[0.0].total == 1 and by_lo[9.0].total == 2  # clamped into the first and last bins
    two = by_lo[2.0]
    assert [s.kind for s in two.segments] == ["exact", "near"]
    tallest = by_lo[5.0].segments[0]
    assert tallest.height == hist.plot_height  # the peak bin fills the plot
    assert two.segments[1].y + two.segments[1].height == two.segments[0].y
    assert hist.markers[0].x == hist.left + 0.9 * hist.plot_width


def test_cosine_histogram_marks_the_cosine_thresholds_in_range() -> None:
    hist = cosine_histogram(
        Counter({(97, "near"): 2, (88, "semantic"): 5, (100, "exact"): 1}), THRESHOLDS
    )
    names = {m.name: m for m in hist.markers}
    assert set(names) == {"semantic_cosine", "near_cosine", "candidate_cosine"}
    assert names["candidate_cosine"].x < names["semantic_cosine"].x < names["near_cosine"].x
    assert all(hist.left <= m.x <= hist.left + hist.plot_width for m in hist.markers)
    assert max(b.hi for b in hist.bars) == 1.0  # cosine 1.0 lands in the last bin
    assert [t.text for t in hist.x_ticks][:2] == ["0.75", "0.8"]


def test_hamming_histogram_line_sits_after_the_threshold_bin() -> None:
    hist = hamming_histogram(Counter({(8, "near"): 1, (9, "semantic"): 1}), THRESHOLDS)
    line = next(m for m in hist.markers if m.name == "phash_hamming")
    eight = next(b for b in hist.bars if b.lo == 8)
    nine = next(b for b in hist.bars if b.lo == 9)
    assert eight.x + eight.width <= line.x <= nine.x
    assert "10" in [t.text for t in hist.x_ticks]


def test_empty_histogram_has_no_bars_and_no_y_ticks() -> None:
    hist = cosine_histogram(Counter(), THRESHOLDS)
    assert hist.bars == () and hist.y_ticks == () and hist.total == 0


def test_near_cosine_line_is_labelled_as_the_forced_geometric_check() -> None:
    hist = cosine_histogram(Counter({(97, "near"): 2}), THRESHOLDS)
    texts = {m.name: m.text for m in hist.markers}
    assert texts["near_cosine"] == "near_cosine ≥ 0.95: geometric check forced"
    assert texts["semantic_cosine"].startswith("semantic_cosine ≥ ")
