"""Which member of a duplicate cluster is kept: the documented ``--keep`` policies."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from splitaudit.indexer.errors import UsageError


@dataclass(frozen=True)
class MemberInfo:
    """What the keep policies look at for one corpus item."""

    item_id: int
    key: str
    width: int | None
    height: int | None
    nbytes: int = 0  # the stored image's size in bytes (0: unknown)

    @property
    def pixels(self) -> int:
        """Pixel count (0 when the size is unknown)."""
        return (self.width or 0) * (self.height or 0)


def _first_key(m: MemberInfo) -> tuple[str, int]:
    return (m.key, m.item_id)


# Every policy is a sort key and whether the smallest (min) or largest (max) member is kept.
# Equal sizes in pixels go to the larger file (the original over a JPEG-40 copy), then the key.
POLICIES: dict[str, tuple[Callable[[MemberInfo], tuple[object, ...]], bool]] = {
    "largest": (lambda m: (-m.pixels, -m.nbytes, *_first_key(m)), False),
    "smallest": (
        lambda m: (m.pixels if m.pixels else float("inf"), -m.nbytes, *_first_key(m)),
        False,
    ),
    "first": (_first_key, False),
    "last": (_first_key, True),
    "oldest": (lambda m: (m.item_id,), False),
    "newest": (lambda m: (m.item_id,), True),
}
POLICY_HELP = (
    "largest: most pixels (default); smallest: fewest pixels (equal pixels: the larger file); "
    "first / last: first / last key in sort order; oldest / newest: indexed first / last"
)
DEFAULT_POLICY = "largest"


def stored_bytes(locator: Mapping[str, Any] | None) -> int:
    """The size in bytes of an item's stored image: a tar member's size, a file's; 0 when unknown."""
    if not locator:
        return 0
    kind, path, size = locator.get("kind"), locator.get("path"), locator.get("size")
    if kind == "tar" and isinstance(size, int):
        return size
    if kind == "file" and isinstance(path, str):
        try:
            return os.stat(path).st_size
        except OSError:
            return 0
    return 0


def check_policy(name: str) -> str:
    """Return ``name`` if it is a keep policy, else raise ``UsageError`` listing them."""
    if name not in POLICIES:
        raise UsageError(f"unknown keep policy {name!r}; choose one of {', '.join(POLICIES)}")
    return name


def kept_member(members: Sequence[MemberInfo], policy: str) -> MemberInfo:
    """The member of a cluster that ``policy`` keeps."""
    key, use_max = POLICIES[check_policy(policy)]
    return max(members, key=key) if use_max else min(members, key=key)
