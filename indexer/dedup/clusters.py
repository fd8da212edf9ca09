"""Duplicate pairs -> clusters (union-find), each member's strongest link, and the kept member."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from splitaudit.indexer.dedup.keep import MemberInfo, kept_member
from splitaudit.indexer.dedup.pairs import Edge
from splitaudit.indexer.dedup.unionfind import UnionFind
from splitaudit.indexer.kinds import KIND_RANK, PIXEL_KINDS, MatchKind

Pair = tuple[int, int]


@dataclass(frozen=True)
class Member:
    """One item of a cluster: its strongest link inside the cluster, and whether it is kept."""

    item_id: int
    kept: bool
    tier: str
    partner_id: int
    hamming: int | None
    cosine: float | None
    verify: float | None


@dataclass(frozen=True)
class Cluster:
    """A group of items linked by duplicate pairs; ``tier`` is its weakest member link."""

    members: tuple[Member, ...]
    semantic: bool = False

    @property
    def tier(self) -> str:
        """The weakest tier among the members' strongest links."""
        return max((m.tier for m in self.members), key=KIND_RANK.__getitem__)

    @property
    def kept(self) -> Member:
        """The member the keep policy keeps."""
        return next(m for m in self.members if m.kept)


def apply_reviews(edges: Mapping[Pair, Edge], verdicts: Mapping[Pair, str]) -> dict[Pair, Edge]:
    """Drop pairs reviewed ``not_duplicate``; add pairs reviewed ``duplicate`` that were not found."""
    out = {pair: e for pair, e in edges.items() if verdicts.get(pair) != "not_duplicate"}
    for (a, b), verdict in verdicts.items():
        if verdict == "duplicate" and (a, b) not in out:
            out[(a, b)] = Edge(a, b, MatchKind.NEAR)
    return out


def build_clusters(
    edges: Iterable[Edge], info: Mapping[int, MemberInfo], policy: str, *, semantic: bool = False
) -> list[Cluster]:
    """Clusters of the given edges, ordered by smallest member id, with one kept member each.

    Each member's strongest link: the edge of the strongest kind, then the fewest pHash bits,
    then the highest verifier score, then the highest cosine; the first given among equals.
    Picked for every member at once by one sort (1M-item bench run, 75k members: 1.85 -> ~0.6
    CPU-s for the whole step).
    """
    edges = list(edges)
    uf = UnionFind()
    for e in edges:
        uf.union(e.a, e.b)
    best = _strongest_links(edges)
    out = []
    for group in uf.groups():
        keep = kept_member([info[i] for i in group], policy).item_id
        members = []
        for item_id in group:
            link = edges[best[item_id]]
            members.append(
                Member(
                    item_id=item_id,
                    kept=item_id == keep,
                    tier=link.kind,
                    partner_id=link.b if link.a == item_id else link.a,
                    hamming=link.hamming,
                    cosine=link.cosine,
                    verify=link.verify,
                )
            )
        out.append(Cluster(tuple(members), semantic=semantic))
    return out


def _strongest_links(edges: Sequence[Edge]) -> dict[int, int]:
    """For every item of ``edges``, the position in ``edges`` of its strongest link: the
    smallest ``(kind rank, hamming or 65, -(verify or -1), -(cosine or -1))``, ties to the
    earlier edge (what ``min`` over each item's edges in order gives)."""
    if not edges:
        return {}
    n = len(edges)
    a = np.fromiter((e.a for e in edges), np.int64, n)
    b = np.fromiter((e.b for e in edges), np.int64, n)
    rank = np.fromiter((KIND_RANK[e.kind] for e in edges), np.int64, n)
    hamming = np.fromiter((65 if e.hamming is None else e.hamming for e in edges), np.float64, n)
    verify = np.fromiter((-(e.verify or -1.0) for e in edges), np.float64, n)
    cosine = np.fromiter((-(e.cosine or -1.0) for e in edges), np.float64, n)
    item = np.r_[a, b]
    pos = np.r_[np.arange(n), np.arange(n)]
    twice = [np.r_[k, k] for k in (cosine, verify, hamming, rank)]
    order = np.lexsort((pos, *twice, item))  # by item, then the key, then the edge's position
    item, pos = item[order], pos[order]
    first = np.r_[True, item[1:] != item[:-1]]
    return dict(zip(item[first].tolist(), pos[first].tolist(), strict=True))


def summarize(
    items: int, clusters: Iterable[Cluster], semantic: Iterable[Cluster] = ()
) -> dict[str, object]:
    """Items, clusters, duplicates (members not kept) and the duplicate rate per tier."""
    clusters = list(clusters)
    dropped = [m for c in clusters for m in c.members if not m.kept]
    by_tier = {tier.value: sum(1 for m in dropped if m.tier == tier) for tier in PIXEL_KINDS}
    out: dict[str, object] = {
        "items": items,
        "clusters": len(clusters),
        "clustered_items": sum(len(c.members) for c in clusters),
        "duplicates": len(dropped),
        "duplicate_rate": round(len(dropped) / items, 6) if items else 0.0,
        "by_tier": by_tier,
        "rate_by_tier": {t: round(n / items, 6) if items else 0.0 for t, n in by_tier.items()},
    }
    sem = list(semantic)
    if sem:
        out["semantic_clusters"] = len(sem)
        out["semantic_items"] = sum(len(c.members) for c in sem)
    return out
