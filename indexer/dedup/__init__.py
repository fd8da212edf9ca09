"""Deduplicating one corpus against itself: duplicate pairs, clusters, a kept member each, a drop list.

``service`` creates and runs a dedup (resumable, chunk by chunk), ``pairs`` finds the
duplicate pairs of a chunk with the audit engine, ``clusters`` groups them (union-find) and
picks the kept member (``keep``), ``reviews`` keeps reviewer verdicts on members, and
``outputs`` renders clusters (JSON / CSV / Parquet) and drop lists. ``docs/dedup.md``
describes the semantics.
"""
