"""Duplicate pairs -> clusters (union-find), each member's strongest link, and the kept member."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    """Clusters of the given edges, ordered by smallest member id, with one kept member each."""
    edges = list(edges)
    uf = UnionFind()
    by_item: dict[int, list[Edge]] = defaultdict(list)
    for e in edges:
        uf.union(e.a, e.b)
        by_item[e.a].append(e)
        by_item[e.b].append(e)
    out = []
    for group in uf.groups():
        keep = kept_member([info[i] for i in group], policy).item_id
        members = []
        for item_id in group:
            best = min(
                by_item[item_id],
                key=lambda e: (
                    KIND_RANK[e.kind],
                    65 if e.hamming is None else e.hamming,
                    -(e.verify or -1.0),
                    -(e.cosine or -1.0),
                ),
            )
            members.append(
                Member(
                    item_id=item_id,
                    kept=item_id == keep,
                    tier=best.kind,
                    partner_id=best.b if best.a == item_id else best.a,
                    hamming=best.hamming,
                    cosine=best.cosine,
                    verify=best.verify,
                )
            )
        out.append(Cluster(tuple(members), semantic=semantic))
    return out


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
