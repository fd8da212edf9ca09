"""The photo dedup bench times each tool as its own process: its peak RSS is the tool's own,
not the (larger) bench process's it was forked from."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from bench.dedup_photos import GNU_TIME, _process


@pytest.mark.skipif(not GNU_TIME.exists(), reason="GNU time (/usr/bin/time) is not installed")
def test_a_small_tool_reports_its_own_peak_not_the_bench_process_size() -> None:
    held = np.ones(300 * 2**20 // 8)  # 300 MiB in the bench process
    run = _process([sys.executable, "-c", "print('ok')"])
    assert run["rc"] == 0 and run["stdout"].strip() == "ok"
    assert 1 < run["peak_rss_mb"] < 200 and held.sum() > 0  # a bare Python: tens of MiB
    failed = _process([sys.executable, "-c", "raise SystemExit(3)"])
    assert failed["rc"] == 3 and 1 < failed["peak_rss_mb"] < 200
