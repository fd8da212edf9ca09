"""Recall / false-positive figures of each matching rule over the benchmark's pair scores."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bench.accuracy.dataset import Item, pair_labels
from bench.accuracy.scores import PairScores
from splitaudit.indexer.match.thresholds import Thresholds

IMAGEDEDUP_THRESHOLD = 10  # imagededup's documented default for PHash.find_duplicates

BoolMatrix = npt.NDArray[np.bool_]
Rule = Callable[[PairScores], BoolMatrix]


@dataclass(frozen=True)
class Pairs:
    """Ground truth for every (query, corpus) pair.

    ``positive``: the query's source. ``distractor``: query and corpus item come from
    different photos (the zero-false-positive target). ``sibling``: a non-overlapping
    region of the query's own photo -- same scene, different pixels: a hard negative,
    reported on its own. Overlapping regions of one photo are ignored.
    """

    queries: tuple[Item, ...]
    positive: BoolMatrix
    distractor: BoolMatrix
    sibling: BoolMatrix

    @classmethod
    def build(cls, queries: list[Item], corpus: list[Item]) -> Pairs:
        """Label every pair of ``queries`` x ``corpus``."""
        labels = pair_labels(queries, corpus)
        same_photo = np.array([[q.photo == c.photo for c in corpus] for q in queries], dtype=bool)
        negative = labels == 0
        return cls(tuple(queries), labels == 1, negative & ~same_photo, negative & same_photo)

    def subset(self, name: str) -> npt.NDArray[np.bool_]:
        """Row mask of the queries in one subset (``hires`` / ``lowres``)."""
        return np.array([q.subset == name for q in self.queries], dtype=bool)

    def transform(self, name: str) -> npt.NDArray[np.bool_]:
        """Row mask of the queries made by one transform."""
        return np.array([q.transform == name for q in self.queries], dtype=bool)


@dataclass(frozen=True)
class Outcome:
    """How one rule did: recall over queries, false positives over pairs and images."""

    recall: float
    recall_hires: float
    recall_lowres: float
    distractor_fp: int
    distractor_pairs: int
    distractor_fp_images: int  # queries with at least one distractor flagged
    sibling_fp: int
    sibling_pairs: int

    @property
    def distractor_fpr(self) -> float:
        """False-positive rate among distractor pairs."""
        return self.distractor_fp / max(self.distractor_pairs, 1)


def outcome(pairs: Pairs, flagged: BoolMatrix) -> Outcome:
    """Score a flagged-pairs matrix against the ground truth."""
    found: npt.NDArray[np.bool_] = np.asarray((flagged & pairs.positive).any(axis=1))
    hires, lowres = pairs.subset("hires"), pairs.subset("lowres")
    return Outcome(
        recall=float(found.mean()),
        recall_hires=float(found[hires].mean()) if hires.any() else float("nan"),
        recall_lowres=float(found[lowres].mean()) if lowres.any() else float("nan"),
        distractor_fp=int((flagged & pairs.distractor).sum()),
        distractor_pairs=int(pairs.distractor.sum()),
        distractor_fp_images=int((flagged & pairs.distractor).any(axis=1).sum()),
        sibling_fp=int((flagged & pairs.sibling).sum()),
        sibling_pairs=int(pairs.sibling.sum()),
    )


def per_transform_recall(pairs: Pairs, flagged: BoolMatrix) -> dict[str, float]:
    """Recall of one rule for each transform, in dataset order."""
    found: npt.NDArray[np.bool_] = np.asarray((flagged & pairs.positive).any(axis=1))
    names = list(dict.fromkeys(q.transform for q in pairs.queries))
    return {name: float(found[pairs.transform(name)].mean()) for name in names}


def default_rules(thresholds: Thresholds) -> dict[str, Rule]:
    """The rules compared at the defaults: ours fused, each signal alone, imagededup."""
    t = thresholds
    return {
        "fused (ours)": lambda s: t.near_mask(
            s.phash_hamming, s.cosine, s.verify, s.min_side, s.geometry
        ),
        "before (cosine near)": lambda s: previous_rule(t, s),
        f"pHash<={t.phash_hamming}": lambda s: s.phash_hamming <= t.phash_hamming,
        f"dHash<={t.phash_hamming}": lambda s: s.dhash_hamming <= t.phash_hamming,
        f"cosine>={t.near_cosine:.2f}": lambda s: s.cosine >= t.near_cosine,
        f"verify>={t.verify_score:.2f}": lambda s: s.verify >= t.verify_score,
        f"geometry>={t.geometry_inliers}": lambda s: _geometry(s) >= t.geometry_inliers,
        f"imagededup PHash@{IMAGEDEDUP_THRESHOLD}": lambda s: (
            s.imagededup_hamming <= IMAGEDEDUP_THRESHOLD
        ),
    }


def _geometry(scores: PairScores) -> npt.NDArray[np.float32]:
    if scores.geometry is None:
        return np.full(scores.cosine.shape, np.nan, np.float32)
    return scores.geometry


def previous_rule(t: Thresholds, s: PairScores) -> BoolMatrix:
    """The near rule of the previous release: cosine >= ``near_cosine`` alone made a large pair near."""
    by_cosine = (s.cosine >= t.near_cosine) & ~t.small_mask(s.min_side)
    return t.near_mask(s.phash_hamming, s.cosine, s.verify, s.min_side) | by_cosine


def nomination_rate(pairs: Pairs, scores: PairScores, t: Thresholds) -> dict[str, float]:
    """Per transform: how often the source is among the engine's geometric candidates
    (top-k by cosine, cosine >= ``candidate_cosine``)."""
    nominated = scores.nominated if scores.nominated is not None else np.ones_like(pairs.positive)
    reach = nominated & (scores.cosine >= t.candidate_cosine) & pairs.positive
    found: npt.NDArray[np.bool_] = np.asarray(reach.any(axis=1))
    names = list(dict.fromkeys(q.transform for q in pairs.queries))
    return {name: float(found[pairs.transform(name)].mean()) for name in names}


@dataclass(frozen=True)
class CurvePoint:
    """One threshold of a sweep and its outcome."""

    threshold: float
    result: Outcome


def sweep(
    pairs: Pairs,
    scores: PairScores,
    rule: Callable[[PairScores, float], BoolMatrix],
    thresholds: list[float],
) -> list[CurvePoint]:
    """Outcomes of ``rule`` over a list of thresholds."""
    return [CurvePoint(t, outcome(pairs, rule(scores, t))) for t in thresholds]


def curves(pairs: Pairs, scores: PairScores, defaults: Thresholds) -> dict[str, list[CurvePoint]]:
    """Recall vs false positives for each signal alone and for the fused rule's knobs."""
    hamming = [float(t) for t in range(0, 33, 2)]
    unit = [round(float(t), 2) for t in np.arange(0.30, 1.0001, 0.05)]
    return {
        "pHash Hamming <= t": sweep(pairs, scores, lambda s, t: s.phash_hamming <= t, hamming),
        "imagededup PHash <= t": sweep(
            pairs, scores, lambda s, t: s.imagededup_hamming <= t, hamming
        ),
        "dHash Hamming <= t": sweep(pairs, scores, lambda s, t: s.dhash_hamming <= t, hamming),
        "cosine >= t": sweep(pairs, scores, lambda s, t: s.cosine >= t, unit),
        "verify >= t": sweep(pairs, scores, lambda s, t: s.verify >= t, unit),
        "fused, verify_score = t": sweep(
            pairs,
            scores,
            lambda s, t: _with(defaults, verify_score=t).near_mask(
                s.phash_hamming, s.cosine, s.verify, s.min_side, s.geometry
            ),
            unit,
        ),
        "fused, geometry_inliers = t": sweep(
            pairs,
            scores,
            lambda s, t: _with(defaults, geometry_inliers=int(t)).near_mask(
                s.phash_hamming, s.cosine, s.verify, s.min_side, s.geometry
            ),
            [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 15.0, 20.0, 30.0],
        ),
    }


def _with(base: Thresholds, **changes: float | int) -> Thresholds:
    return Thresholds.from_mapping(changes, base=base)


@dataclass(frozen=True)
class Boundaries:
    """How far each criterion of the fused rule could move before the first distractor FP."""

    phash_hamming: int  # largest radius with no large distractor pair inside
    small_phash_verify: float  # highest verification score of small distractor pairs in that radius
    large_phash_verify: float  # lowest verification score of large copies within the radius
    near_cosine: float  # highest cosine among large distractor pairs
    verify_score: float  # highest verification score among candidate distractor pairs
    sibling_verify: float  # same, among candidate sibling pairs
    geometry_inliers: float  # highest geometric support among distractor pairs matched
    sibling_geometry: float  # same, among sibling pairs


def _max(values: npt.NDArray[np.float32]) -> float:
    return float(values.max()) if values.size else float("nan")


def boundaries(pairs: Pairs, scores: PairScores, t: Thresholds) -> Boundaries:
    """The zero-false-positive edges, to compare with the defaults (margins)."""
    dis = pairs.distractor
    small = t.small_mask(scores.min_side)
    hashed = scores.phash_hamming <= t.phash_hamming
    candidate = t.candidate_mask(scores.phash_hamming, scores.cosine, scores.min_side)
    large_hamming = scores.phash_hamming[dis & ~small]
    return Boundaries(
        phash_hamming=int(large_hamming.min()) - 1 if large_hamming.size else 64,
        small_phash_verify=_max(scores.verify[dis & small & hashed]),
        large_phash_verify=_nanmin(scores.verify[pairs.positive & ~small & hashed]),
        near_cosine=_max(scores.cosine[dis & ~small]),
        verify_score=_max(scores.verify[dis & candidate]),
        sibling_verify=_max(scores.verify[pairs.sibling & candidate]),
        geometry_inliers=_nanmax(_geometry(scores)[dis]),
        sibling_geometry=_nanmax(_geometry(scores)[pairs.sibling]),
    )


def _nanmin(values: npt.NDArray[np.float32]) -> float:
    values = values[~np.isnan(values)]
    return float(values.min()) if values.size else float("nan")


def _nanmax(values: npt.NDArray[np.float32]) -> float:
    values = values[~np.isnan(values)]
    return float(values.max()) if values.size else float("nan")


@dataclass(frozen=True)
class SemanticProbe:
    """The semantic tier on disjoint halves of one photo (same scene, no shared pixels)."""

    same_scene_pairs: int
    same_scene_recall: float  # halves of one photo flagged semantic or near
    same_scene_near: float  # ... of which called near (the tiers' confusion)
    unrelated_pairs: int
    unrelated_fp: int  # halves of different photos flagged semantic or near
    distractor_semantic_fp: int  # main-benchmark distractor pairs flagged semantic
    distractor_semantic_fpr: float


def semantic_probe(
    probes: list[Item],
    embeddings: npt.NDArray[np.float32],
    min_side: npt.NDArray[np.int32],
    pairs: Pairs,
    scores: PairScores,
    t: Thresholds,
) -> SemanticProbe:
    """Measure the semantic tier: same-scene halves vs halves of unrelated photos."""
    cosine = embeddings @ embeddings.T
    side = np.minimum(min_side[:, None], min_side[None, :])
    upper = np.triu(np.ones_like(cosine, dtype=bool), k=1)
    same = np.array([[a.photo == b.photo for b in probes] for a in probes]) & upper
    unrelated = ~same & upper
    nan = np.full(cosine.shape, np.nan)
    flagged = t.semantic_mask(nan, cosine, nan, side) | t.near_mask(nan, cosine, nan, side)
    near = t.near_mask(nan, cosine, nan, side)
    semantic = t.semantic_mask(scores.phash_hamming, scores.cosine, scores.verify, scores.min_side)
    return SemanticProbe(
        same_scene_pairs=int(same.sum()),
        same_scene_recall=float(flagged[same].mean()),
        same_scene_near=float(near[same].mean()),
        unrelated_pairs=int(unrelated.sum()),
        unrelated_fp=int(flagged[unrelated].sum()),
        distractor_semantic_fp=int((semantic & pairs.distractor).sum()),
        distractor_semantic_fpr=float(
            (semantic & pairs.distractor).sum() / max(pairs.distractor.sum(), 1)
        ),
    )
