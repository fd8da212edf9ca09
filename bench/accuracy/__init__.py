"""Accuracy benchmark: calibrates the near / semantic thresholds on real photos and edits.

Run with ``python -m bench.accuracy``; see ``docs/thresholds.md`` for what it measures.
"""
