"""A union-find (disjoint set) over sparse integer ids, for grouping duplicate pairs."""

from __future__ import annotations

from collections import defaultdict


class UnionFind:
    """Disjoint sets of ints, created lazily: only ids that take part in a pair use memory."""

    def __init__(self) -> None:
        self._parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        """The representative of ``x``'s set (path halving)."""
        parent = self._parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        """Merge the sets of ``a`` and ``b`` (the smaller id becomes the root: deterministic)."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = (ra, rb) if ra < rb else (rb, ra)
            self._parent[hi] = lo

    def groups(self) -> list[list[int]]:
        """Every set of two or more ids, members sorted, sets ordered by their smallest id."""
        out: dict[int, list[int]] = defaultdict(list)
        for x in self._parent:
            out[self.find(x)].append(x)
        return sorted((sorted(g) for g in out.values() if len(g) > 1), key=lambda g: g[0])
