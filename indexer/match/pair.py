"""The evidence record of one (query row, corpus item) pair, and its kind from that evidence."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from splitaudit.indexer.features.perceptual import Orientation
from splitaudit.indexer.kinds import MatchKind
from splitaudit.indexer.match.geometry import GeometricMatch
from splitaudit.indexer.match.thresholds import Thresholds

PairOf = Callable[[int, int], "Pair"]  # the evidence record of (query row, candidate id)


@dataclass
class Pair:
    """Evidence gathered for one (split item row, corpus item) pair."""

    row: int
    item_id: int
    sha_equal: bool = False
    pixel_equal: bool = False
    stream_equal: bool = False
    hamming: int | None = None
    # how the test image is turned / flipped relative to the corpus image, by the closest pHash
    orientation: Orientation = "identity"
    cosine: float | None = None
    # nominated only by a small test image's wider embedding search (``SMALL_TOP_K``, beyond
    # its ``TOP_K`` nearest) or its shape search: verified upright and mirrored, never turned
    # (``turn_small_pairs``)
    wide_only: bool = False
    # shape-descriptor cosine of a pair a small test image's shape search nominated
    # (``pair_search.shape_pairs``): a verification candidate by that (rule 3)
    shape: float | None = None
    verify: float | None = None
    min_side: int | None = None
    geometry: GeometricMatch | None = None
    # best cosine of a region of a large test image (``inset_candidates``): an inset copy
    region_cosine: float | None = None
    # that region's box (x0, y0, x1, y1, fractions of the test image: a window of the grid
    # or a framed picture, ``inset_candidates.region_crops``): where a refit looks
    region: tuple[float, float, float, float] | None = None
    # the best region box of the other kind (``RegionHit.other_box``): refitted on when
    # ``region``'s refit finds no copy
    other_region: tuple[float, float, float, float] | None = None
    # cosine of the content region alone of a pair whose fit was refused as an overlay
    # (``content_region``): semantic only if it is similar too
    content_cosine: float | None = None
    # a small pair's marginal verifier score that the low-resolution alignment did not confirm
    # (``low_res_align.needs_confirmation``): ``verify`` then holds the alignment's score
    unconfirmed_verify: float | None = None
    # a small pair's pHash distance within the near radius in a turned orientation (a quarter
    # turn, a vertical flip, a transpose) that the verifier did not confirm at ``verify_score``
    # (``small_pairs.confirm_turned_hashes``): the pair is not near by that hash
    unconfirmed_turned_hamming: int | None = None
    # a large pair's verifier score refused as resting on a shared overlay
    # (``verify_overlay``): compared whole, only ``whole_agreement`` of the textured cells agree
    refused_verify: float | None = None
    whole_agreement: float | None = None
    kind: str | None = None
    rules: list[str] = field(default_factory=list)

    @property
    def mirrored(self) -> bool:
        """Whether the test image is the corpus image flipped left-right (by the pHash)."""
        return self.orientation == "mirror"

    @mirrored.setter
    def mirrored(self, value: bool) -> None:
        self.orientation = "mirror" if value else "identity"

    @property
    def digest_equal(self) -> bool:
        """Same file, same decoded pixels, or same JPEG coded data: an exact copy."""
        return self.sha_equal or self.pixel_equal or self.stream_equal

    def evidence(self) -> dict[str, Any]:
        """What the report shows as the reason for this match."""
        ev: dict[str, Any] = {}
        if self.sha_equal:
            ev["sha256_equal"] = True
        if self.pixel_equal:
            ev["pixel_digest_equal"] = True
        if self.stream_equal:
            ev["stream_digest_equal"] = True
        if self.hamming is not None:
            ev["phash_hamming"] = self.hamming
            if self.mirrored:
                ev["mirrored"] = True
            if self.orientation != "identity":
                ev["orientation"] = self.orientation
        if self.cosine is not None:
            ev["cosine"] = round(self.cosine, 4)
        if self.shape is not None:
            ev["shape_cosine"] = round(self.shape, 4)
        if self.verify is not None:
            ev["verify_score"] = round(self.verify, 4)
        if self.unconfirmed_verify is not None:
            ev["unconfirmed_verify_score"] = round(self.unconfirmed_verify, 4)
        if self.unconfirmed_turned_hamming is not None:
            ev["unconfirmed_turned_phash"] = {
                "phash_hamming": self.unconfirmed_turned_hamming,
                "orientation": self.orientation,
            }
        if self.refused_verify is not None:
            ev["verify_refused"] = {
                "verify_score": round(self.refused_verify, 4),
                "whole_agreement": round(self.whole_agreement or 0.0, 3),
                "reason": "overlay: compared whole, too little of the two images agrees "
                "(a shared frame, window chrome or caption bands, not the picture)",
            }
        if self.geometry is not None and self.geometry.inliers:
            ev["geometry"] = self.geometry.evidence()
        if self.content_cosine is not None:
            ev["content_cosine"] = round(self.content_cosine, 4)
        if self.rules:
            ev["near_rules"] = self.rules
        if self.min_side is not None:
            ev["min_side"] = self.min_side
        return ev


@dataclass
class CorpusMatches:
    """The classified pairs of a split against one corpus (each with a kind)."""

    corpus: str
    pairs: list[Pair] = field(default_factory=list)


def classify_all(pairs: Sequence[Pair], th: Thresholds) -> None:
    """Set each pair's kind from its evidence (``None``: not a duplicate) and, for a near
    pair, the near rules it meets: digests decide exact copies, ``Thresholds.classify_many``
    the rest, its rule masks computed over arrays. The engine classifies a chunk's pairs
    with it (at 1M, dedup's engine classified ~150,000 pairs one by one: a third of its CPU)."""
    rest = []
    for p in pairs:
        if p.digest_equal:
            p.kind = MatchKind.EXACT
        else:
            rest.append(p)
    verdicts = th.classify_many(
        [p.hamming for p in rest],
        [p.cosine for p in rest],
        [p.verify for p in rest],
        [p.min_side for p in rest],
        [None if p.geometry is None else p.geometry.support for p in rest],
        [p.content_cosine for p in rest],
        [p.shape for p in rest],
    )
    for p, (kind, rules) in zip(rest, verdicts, strict=True):
        p.kind = kind
        if kind == MatchKind.NEAR:
            p.rules = rules


def near_all(pairs: Sequence[Pair], th: Thresholds) -> list[bool]:
    """Whether each pair is near by its evidence so far (no geometric match yet):
    ``Thresholds.near_many`` over the pairs' columns at once."""
    return th.near_many(
        [p.hamming for p in pairs],
        [p.cosine for p in pairs],
        [p.verify for p in pairs],
        [p.min_side for p in pairs],
        [p.shape for p in pairs],
    )
