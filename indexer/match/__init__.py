"""The match engine: candidate search, pixel and geometric verification, thresholds and calibration.

Below ``audit``, ``dedup`` and ``pipeline``, which use it; it imports none of them.
"""
