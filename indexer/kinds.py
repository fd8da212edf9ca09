"""The one list of match kinds (the tier registry) and of job statuses; every module that names them imports them from here.

A tier is registered once, in ``TIERS``: its kind, how its matches read, its colour, whether it
counts toward the contaminated rate and whether the gate fails on it by default. The report's
counts, the gate policy, every report format (JSON, CSV, JUnit, Markdown, HTML), the review UI's
badges, charts and CSS (``/ui/tiers.css``) all read this registry, so a new tier is its matching
module plus one ``MatchKind`` member and one ``Tier`` line here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MatchKind(StrEnum):
    """What a match says about a test item, strongest first (the order is the verdict's rank)."""

    EXACT = "exact"
    NEAR = "near"
    SEMANTIC = "semantic"
    LABEL_LEAK = "label_leak"
    CAPTION = "caption"


class JobStatus(StrEnum):
    """Where a job (an audit or an indexing run) stands, in the order it moves through them."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Tier:
    """How a match kind is shown and judged everywhere outside the engine that finds it."""

    kind: MatchKind
    phrase: str  # one match in words; ``{target}`` is the matched corpus item (``corpus:key``)
    colour: str  # badges, borders and chart fills (review UI, HTML report)
    pixels: bool = False  # the image itself is shared: counts toward the contaminated rate
    image: bool = False  # found by comparing images (a baseline entry may move between these)
    fails_by_default: bool = False  # in the gate's default ``fail_on``


# The registry, strongest first (the order is the verdict's rank).
TIERS: tuple[Tier, ...] = (
    Tier(MatchKind.EXACT, "exact duplicate of {target}", "#a51d2d", True, True, True),
    Tier(MatchKind.NEAR, "near duplicate of {target}", "#b54000", True, True, True),
    Tier(MatchKind.SEMANTIC, "semantic match of {target}", "#613583", image=True),
    Tier(MatchKind.LABEL_LEAK, "label leak via {target}", "#0b6e4f"),
    Tier(MatchKind.CAPTION, "caption copy of {target}", "#1c5d99"),
)
TIER_BY_KIND: dict[str, Tier] = {t.kind.value: t for t in TIERS}

MATCH_KINDS: tuple[MatchKind, ...] = tuple(t.kind for t in TIERS)
# Rank of each kind for "strongest first" sorting (exact 0 ... label_leak 3); keys compare as plain strings.
KIND_RANK: dict[str, int] = {t.kind.value: rank for rank, t in enumerate(TIERS)}
# The image itself is shared (what the contaminated rate counts).
PIXEL_KINDS: tuple[MatchKind, ...] = tuple(t.kind for t in TIERS if t.pixels)
# Kinds found by comparing images (as opposed to metadata); a baseline entry may move between them.
IMAGE_KINDS: tuple[MatchKind, ...] = tuple(t.kind for t in TIERS if t.image)
# What the gate fails on when the policy does not say.
DEFAULT_FAIL_KINDS: tuple[MatchKind, ...] = tuple(t.kind for t in TIERS if t.fails_by_default)


def tier_css(*, prefix: str = ".kind-") -> str:
    """CSS of every tier's colour: ``--KIND`` variables, badge, border and chart-fill classes."""
    rules = [":root{" + "".join(f"--{t.kind.value}:{t.colour};" for t in TIERS) + "}"]
    for t in TIERS:
        k = t.kind.value
        rules += [
            f"{prefix}{k}{{background:var(--{k})}}",
            f".kind-border-{k}{{border-left:5px solid var(--{k})}}",
            f".fill-{k}{{fill:var(--{k})}}",
        ]
    return "\n".join(rules) + "\n"


JOB_STATUSES: tuple[JobStatus, ...] = tuple(JobStatus)
ACTIVE_JOB_STATUSES: tuple[JobStatus, ...] = (JobStatus.QUEUED, JobStatus.RUNNING)
