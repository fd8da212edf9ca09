"""bench.dedup's vector-join work per item: what the join report says each item cost."""

from __future__ import annotations

from typing import Any

import pytest

from bench.dedup import join_work, median_run, report_join


def _result(
    items: int, nlist: int, probes: float, scored: int, width: int | None
) -> dict[str, Any]:
    join = {
        "method": "ivf",
        "nlist": nlist,
        "probes_per_item": probes,
        "scored_per_item": scored,
        "coarse": {"width": width, "recall": 0.9, "full": 0.999},
    }
    return {"items": items, "summary_joins": {"vector_join": join}}


def test_full_coarse_step_scores_every_centroid() -> None:
    work = join_work(_result(1_000, 64, 3.5, 400, None))
    assert work is not None
    assert work["coarse"] == 64  # every cell's centroid
    assert work["dots"] == 64 + 400
    assert (work["cells"], work["probes"], work["scored"]) == (64, 3.5, 400)


def test_two_level_coarse_step_scores_its_width() -> None:
    work = join_work(_result(1_000, 512, 3.0, 300, 24))
    assert work is not None
    assert work["coarse"] == 24
    assert work["dots"] == 24 + 300


@pytest.mark.parametrize("join", [{"method": "exact", "pairs": 10}, {"method": "empty"}, None])
def test_no_cell_join_has_no_work(join: dict[str, Any] | None) -> None:
    result: dict[str, Any] = {"items": 10}
    if join is not None:
        result["summary_joins"] = {"vector_join": join}
    assert join_work(result) is None


def test_report_prints_growth_against_the_smallest_size(capsys: pytest.CaptureFixture[str]) -> None:
    small, large = _result(100, 10, 2.0, 100, None), _result(1_000, 40, 4.0, 300, None)
    report_join([small, {"items": 500}, large])  # a size without a cell join is left out
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.strip().splitlines()[1:]}
    assert rows["dots"][-1] == f"x{(40 + 300) / (10 + 100):.2f}"
    assert rows["probes"][-1] == "x2.00"
    assert "500" not in out.splitlines()[1]


def test_repeated_runs_report_the_median_cpu() -> None:
    runs = [
        {"items": 10, "dedup_cpu_s": cpu, "tag": tag}
        for cpu, tag in ((5.0, "a"), (4.1, "b"), (4.6, "c"), (9.0, "d"))
    ]
    runs[2]["baseline"] = {"pairs": 3}
    out = median_run(runs)
    ranked = sorted(r["dedup_cpu_s"] for r in runs)
    assert out["dedup_cpu_s"] == ranked[(len(runs) - 1) // 2]  # the lower middle of four
    assert out["tag"] == "c"
    assert out["cpu_runs"] == [r["dedup_cpu_s"] for r in runs]  # in run order
    assert out["baseline"] == {"pairs": 3}
    single = median_run(runs[:1])
    assert single["tag"] == "a" and single["cpu_runs"] == [5.0] and "baseline" not in single
