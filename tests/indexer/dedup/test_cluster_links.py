"""Each cluster member's strongest link, picked by one sort, is the one ``min`` over its edges picks."""

from __future__ import annotations

import random
from collections import defaultdict

from splitaudit.indexer.dedup.clusters import build_clusters
from splitaudit.indexer.dedup.keep import MemberInfo
from splitaudit.indexer.dedup.pairs import Edge
from splitaudit.indexer.kinds import KIND_RANK, MatchKind


def _reference_links(edges: list[Edge]) -> dict[int, Edge]:
    """Every item's strongest link as the first implementation chose it (``min`` in order)."""
    by_item: dict[int, list[Edge]] = defaultdict(list)
    for e in edges:
        by_item[e.a].append(e)
        by_item[e.b].append(e)
    return {
        i: min(
            es,
            key=lambda e: (
                KIND_RANK[e.kind],
                65 if e.hamming is None else e.hamming,
                -(e.verify or -1.0),
                -(e.cosine or -1.0),
            ),
        )
        for i, es in by_item.items()
    }


def _random_edges(rng: random.Random, n: int) -> list[Edge]:
    kinds = [MatchKind.EXACT, MatchKind.NEAR, MatchKind.SEMANTIC]
    out: dict[tuple[int, int], Edge] = {}
    while len(out) < n:
        a, b = sorted(rng.sample(range(1, 60), 2))
        out[(a, b)] = Edge(
            a,
            b,
            rng.choice(kinds),
            rng.choice([None, 0, 2, 2, 5]),  # many ties, and None against 0
            rng.choice([None, 0.0, 0.9, 0.9, -0.2]),
            rng.choice([None, 0.0, 0.8, 0.8]),
        )
    edges = list(out.values())
    rng.shuffle(edges)
    return edges


def test_strongest_links_are_the_reference_ones_ties_included() -> None:
    rng = random.Random(7)
    for _ in range(40):
        edges = _random_edges(rng, rng.randint(1, 120))
        info = {i: MemberInfo(i, f"k{i:03d}", 10 + i % 3, 10) for i in range(1, 60)}
        want = _reference_links(edges)
        clusters = build_clusters(edges, info, "largest")
        seen = set()
        for c in clusters:
            ids = [m.item_id for m in c.members]
            assert ids == sorted(ids)
            for m in c.members:
                ref = want[m.item_id]
                partner = ref.b if ref.a == m.item_id else ref.a
                got = (m.tier, m.partner_id, m.hamming, m.cosine, m.verify)
                assert got == (ref.kind, partner, ref.hamming, ref.cosine, ref.verify)
                seen.add(m.item_id)
        assert seen == set(want)
        assert [c.members[0].item_id for c in clusters] == sorted(
            c.members[0].item_id for c in clusters
        )


def test_an_exact_group_links_each_copy_to_its_first_edge() -> None:
    edges = [
        Edge(1, 3, MatchKind.EXACT),
        Edge(1, 2, MatchKind.EXACT),
        Edge(2, 3, MatchKind.NEAR, 1),
    ]
    info = {i: MemberInfo(i, f"k{i}", 10, 10) for i in (1, 2, 3)}
    (cluster,) = build_clusters(edges, info, "first")
    partners = {m.item_id: m.partner_id for m in cluster.members}
    assert partners == {1: 3, 2: 1, 3: 1}  # 1: two equal exact links, the first given wins
    assert [m.kept for m in cluster.members] == [True, False, False]
