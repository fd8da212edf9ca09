"""The one list of match kinds and of job statuses; every module that names them imports them from here."""

from __future__ import annotations

from enum import StrEnum


class MatchKind(StrEnum):
    """What a match says about a test item, strongest first (the order is the verdict's rank)."""

    EXACT = "exact"
    NEAR = "near"
    SEMANTIC = "semantic"
    LABEL_LEAK = "label_leak"


class JobStatus(StrEnum):
    """Where a job (an audit or an indexing run) stands, in the order it moves through them."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


MATCH_KINDS: tuple[MatchKind, ...] = tuple(MatchKind)
# Rank of each kind for "strongest first" sorting (exact 0 ... label_leak 3); keys compare as plain strings.
KIND_RANK: dict[str, int] = {kind.value: rank for rank, kind in enumerate(MatchKind)}
# The image itself is shared (what the contaminated rate counts).
PIXEL_KINDS: tuple[MatchKind, ...] = (MatchKind.EXACT, MatchKind.NEAR)
# Kinds found by comparing images (as opposed to metadata); a baseline entry may move between them.
IMAGE_KINDS: tuple[MatchKind, ...] = (MatchKind.EXACT, MatchKind.NEAR, MatchKind.SEMANTIC)

JOB_STATUSES: tuple[JobStatus, ...] = tuple(JobStatus)
ACTIVE_JOB_STATUSES: tuple[JobStatus, ...] = (JobStatus.QUEUED, JobStatus.RUNNING)
