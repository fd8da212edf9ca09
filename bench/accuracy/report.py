"""Plain-text tables and the PNG curve for the accuracy benchmark."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from bench.accuracy.evaluate import Boundaries, CurvePoint, Outcome, Pairs, SemanticProbe
from bench.accuracy.scores import PairScores
from splitaudit.indexer.match.thresholds import Thresholds


def _pct(value: float) -> str:
    return f"{100 * value:5.1f}%"


def _edge(value: float) -> str:
    return "none" if np.isnan(value) else f"{value:.3f}"


def transform_table(recalls: Mapping[str, Mapping[str, float]], counts: Mapping[str, int]) -> str:
    """Rows = transforms, columns = rules, cells = recall."""
    rules = list(recalls)
    transforms = list(next(iter(recalls.values())))
    width = max(len(r) for r in rules) + 2
    head = f"{'transform':<16}{'n':>4}" + "".join(f"{r:>{width}}" for r in rules)
    lines = [head, "-" * len(head)]
    for name in transforms:
        cells = "".join(f"{_pct(recalls[r][name]):>{width}}" for r in rules)
        lines.append(f"{name:<16}{counts[name]:>4}{cells}")
    return "\n".join(lines)


def summary_table(results: Mapping[str, Outcome]) -> str:
    """Per rule: recall (all / full-size / low-res) and false positives."""
    width = max(len(r) for r in results) + 2
    head = (
        f"{'rule':<{width}}{'recall':>8}{'hires':>8}{'lowres':>8}{'distractor FP':>15}"
        f"{'FPR':>10}{'FP images':>11}{'sibling FP':>12}"
    )
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        lines.append(
            f"{name:<{width}}{_pct(r.recall):>8}{_pct(r.recall_hires):>8}{_pct(r.recall_lowres):>8}"
            f"{r.distractor_fp:>8} / {r.distractor_pairs:<5}{r.distractor_fpr:>10.2e}"
            f"{r.distractor_fp_images:>11}{r.sibling_fp:>7} / {r.sibling_pairs:<4}"
        )
    return "\n".join(lines)


def curve_table(name: str, points: list[CurvePoint]) -> str:
    """One sweep as rows: threshold, recall (all / hires / lowres), distractor FP, FPR, sibling FP."""
    lines = [
        f"{name}",
        f"{'t':>7}{'recall':>8}{'hires':>8}{'lowres':>8}{'dist FP':>9}{'FPR':>10}{'sib FP':>8}",
    ]
    for p in points:
        r = p.result
        lines.append(
            f"{p.threshold:>7.2f}{_pct(r.recall):>8}{_pct(r.recall_hires):>8}{_pct(r.recall_lowres):>8}"
            f"{r.distractor_fp:>9}{r.distractor_fpr:>10.2e}{r.sibling_fp:>8}"
        )
    return "\n".join(lines)


def operating_point(t: Thresholds, fused: Outcome, edges: Boundaries) -> str:
    """The defaults, the fused rule's result there, and each criterion's margin to the first FP."""
    return "\n".join(
        [
            f"defaults: {t.to_dict()}",
            f"fused near rule at the defaults: recall {_pct(fused.recall)} (full-size {_pct(fused.recall_hires)}, "
            f"low-res {_pct(fused.recall_lowres)}); distractor false positives {fused.distractor_fp} of "
            f"{fused.distractor_pairs} pairs; sibling false positives {fused.sibling_fp} of {fused.sibling_pairs}",
            "zero-FP edges (first distractor FP just beyond):",
            f"  pHash Hamming (pairs >= {t.small_side}px): default {t.phash_hamming}, "
            f"largest FP-free radius {edges.phash_hamming}",
            f"  pHash match on small pairs: default verify >= {t.small_phash_verify:.2f}, "
            f"highest distractor {_edge(edges.small_phash_verify)}",
            f"  pHash match on large pairs: default verify >= {t.large_phash_verify:.2f} where "
            f"computed, lowest copy within the radius {_edge(edges.large_phash_verify)}",
            f"  cosine (pairs >= {t.small_side}px; nominates only): near_cosine {t.near_cosine:.2f}, "
            f"highest distractor cosine {_edge(edges.near_cosine)}",
            f"  verify score (candidates): default {t.verify_score:.2f}, "
            f"highest distractor {_edge(edges.verify_score)}, highest sibling {_edge(edges.sibling_verify)}",
            f"  geometric inliers (shortlisted pairs): default {t.geometry_inliers}, "
            f"highest distractor {_edge(edges.geometry_inliers)}, highest sibling {_edge(edges.sibling_geometry)}",
        ]
    )


def semantic_summary(t: Thresholds, probe: SemanticProbe, model_id: str) -> str:
    """The semantic tier on same-scene halves vs unrelated halves."""
    return "\n".join(
        [
            f"semantic tier ({model_id}, semantic_cosine {t.semantic_cosine:.2f}, images >= {t.small_side}px):",
            f"  same-scene halves flagged: {_pct(probe.same_scene_recall)} of {probe.same_scene_pairs} "
            f"(called near: {_pct(probe.same_scene_near)})",
            f"  unrelated halves flagged: {probe.unrelated_fp} of {probe.unrelated_pairs}",
            f"  benchmark distractor pairs flagged semantic: {probe.distractor_semantic_fp} "
            f"(FPR {probe.distractor_semantic_fpr:.2e})",
        ]
    )


def save_plot(
    curves: Mapping[str, list[CurvePoint]], defaults: Mapping[str, Outcome], path: Path
) -> None:
    """Recall vs distractor false-positive rate, one line per sweep, defaults marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, attr, title in (
        (axes[0], "recall_hires", "full-size edits"),
        (axes[1], "recall_lowres", "low-res (32-64 px)"),
    ):
        floor = 1e-7
        for name, points in curves.items():
            xs = [max(p.result.distractor_fpr, floor) for p in points]
            ys = [getattr(p.result, attr) for p in points]
            ax.plot(xs, ys, marker=".", label=name)
        for name, r in defaults.items():
            ax.scatter(
                [max(r.distractor_fpr, floor)], [getattr(r, attr)], marker="*", s=120, zorder=5
            )
            ax.annotate(
                name,
                (max(r.distractor_fpr, floor), getattr(r, attr)),
                fontsize=7,
                xytext=(4, -8),
                textcoords="offset points",
            )
        ax.set_xscale("log")
        ax.set_xlabel(f"false-positive rate among distractor pairs (0 drawn at {floor:g})")
        ax.set_ylabel("recall")
        ax.set_title(title)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_distributions(pairs: Pairs, scores: PairScores, t: Thresholds, path: Path) -> None:
    """Histograms of verify score and cosine for sources, siblings and distractors, defaults marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lowres = pairs.subset("lowres")[:, None]
    large = ~t.small_mask(scores.min_side)
    candidate = t.candidate_mask(scores.phash_hamming, scores.cosine, scores.min_side)
    panels = [
        (
            "verify score, low-res pairs (candidates)",
            scores.verify,
            lowres & candidate,
            t.verify_score,
        ),
        (
            "verify score, full-size pairs (candidates)",
            scores.verify,
            ~lowres & candidate,
            t.verify_score,
        ),
        (f"cosine, both images >= {t.small_side}px", scores.cosine, large, t.near_cosine),
        (f"cosine, an image < {t.small_side}px", scores.cosine, ~large, t.near_cosine),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    bins = np.linspace(-1, 1, 81)
    for ax, (title, values, mask, default) in zip(axes.flat, panels, strict=True):
        for label, kind in (
            ("source (positive)", pairs.positive),
            ("sibling", pairs.sibling),
            ("distractor", pairs.distractor),
        ):
            selected = values[kind & mask]
            if selected.size:
                ax.hist(
                    selected,
                    bins=bins,
                    density=True,
                    histtype="step",
                    label=f"{label} (n={selected.size})",
                )
        ax.axvline(default, color="k", linestyle="--", label=f"default {default:.2f}")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
