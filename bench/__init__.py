"""Benchmarks (not tests): run one as ``python -m bench.NAME``; each prints ratios measured in one run."""
