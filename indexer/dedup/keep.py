"""Which member of a duplicate cluster is kept: the documented ``--keep`` policies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from splitaudit.indexer.errors import UsageError


@dataclass(frozen=True)
class MemberInfo:
    """What the keep policies look at for one corpus item."""

    item_id: int
    key: str
    width: int | None
    height: int | None

    @property
    def pixels(self) -> int:
        """Pixel count (0 when the size is unknown)."""
        return (self.width or 0) * (self.height or 0)


def _first_key(m: MemberInfo) -> tuple[str, int]:
    return (m.key, m.item_id)


# Every policy is a sort key and whether the smallest (min) or largest (max) member is kept.
POLICIES: dict[str, tuple[Callable[[MemberInfo], tuple[object, ...]], bool]] = {
    "largest": (lambda m: (-m.pixels, *_first_key(m)), False),
    "smallest": (lambda m: (m.pixels if m.pixels else float("inf"), *_first_key(m)), False),
    "first": (_first_key, False),
    "last": (_first_key, True),
    "oldest": (lambda m: (m.item_id,), False),
    "newest": (lambda m: (m.item_id,), True),
}
POLICY_HELP = (
    "largest: most pixels (default); smallest: fewest pixels; first / last: first / last key "
    "in sort order; oldest / newest: indexed first / last"
)
DEFAULT_POLICY = "largest"


def check_policy(name: str) -> str:
    """Return ``name`` if it is a keep policy, else raise ``UsageError`` listing them."""
    if name not in POLICIES:
        raise UsageError(f"unknown keep policy {name!r}; choose one of {', '.join(POLICIES)}")
    return name


def kept_member(members: Sequence[MemberInfo], policy: str) -> MemberInfo:
    """The member of a cluster that ``policy`` keeps."""
    key, use_max = POLICIES[check_policy(policy)]
    return max(members, key=key) if use_max else min(members, key=key)
