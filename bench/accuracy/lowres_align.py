"""``python -m bench.accuracy.lowres_align``: the low-resolution alignment on bench.accuracy's cases.

``bench.accuracy`` scores pairs with the pixel verifier; the audit also aligns small pairs the
verifier leaves open (``splitaudit.indexer.match.low_res_align``). This runs that alignment on
the accuracy bench's low-resolution subset, built independently of ``bench.recall``: every
edited copy against its source tile (recall per edit at ``ALIGNED_NEAR``), and every copy
against every corpus thumbnail that shares no pixels with it (the same photo's other tiles:
same-scene siblings; other photos' tiles and crops; LFW faces): the best such score and how
many reach ``ALIGNED_NEAR`` (false positives, were the pair nominated). A pair the copy's
alignment leaves between ``ALIGNED_BACK_FROM`` and ``ALIGNED_NEAR`` is aligned the other way
round too, the corpus thumbnail onto the copy, as the audit does. ``--before PATH`` runs
another checkout's module in the same run (``git worktree add /tmp/before HEAD``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import numpy as np
from PIL import Image

from bench.accuracy.dataset import dataset_root, load_dataset, pair_labels

CACHE = Path(__file__).resolve().parent.parent / ".cache"


def _module(checkout: Path | None) -> ModuleType:
    """``low_res_align`` of a checkout (None: the installed library)."""
    if checkout is None:
        from splitaudit.indexer.match import low_res_align

        return low_res_align
    name = f"low_res_align_{abs(hash(str(checkout)))}"
    spec = importlib.util.spec_from_file_location(
        name, checkout / "indexer" / "match" / "low_res_align.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def measure(
    module: ModuleType,
    images: list[Image.Image],
    thumbs: np.ndarray,
    labels: np.ndarray,
    edits: list[str],
) -> dict[str, object]:
    """Recall per edit and the negatives' scores of one version of the module."""
    from splitaudit.indexer.match.verify import verify_thumbnail

    near = float(module.ALIGNED_NEAR)
    back_from = getattr(module, "ALIGNED_BACK_FROM", None)  # None: a checkout before 0.5.0
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    best_negative, over, negatives = -1.0, 0, 0
    started = time.process_time()
    pairs = reversed_pairs = 0
    for i, image in enumerate(images):
        query = module.prepare_query(image)
        scores = module.aligned_scores(query, thumbs)
        pairs += len(scores)
        # the audit's second way round, for small test images (``small_pairs``)
        if back_from is not None and min(image.size) <= module.MAX_SIDE:
            back = np.flatnonzero((scores >= back_from) & (scores < near))
            reversed_pairs += len(back)
            own = verify_thumbnail(image)[None]
            for j in back.tolist():
                scores[j] = max(scores[j], module.aligned_scores(thumbs[j], own)[0])
        target = int(np.flatnonzero(labels[i] == 1)[0])
        found[edits[i]][1] += 1
        found[edits[i]][0] += bool(scores[target] >= near)
        negative = labels[i] == 0
        negatives += int(negative.sum())
        over += int((scores[negative] >= near).sum())
        best_negative = max(best_negative, float(scores[negative].max(initial=-1.0)))
    return {
        "found": dict(found),
        "best_negative": best_negative,
        "over": over,
        "negatives": negatives,
        "us_per_pair": 1e6 * (time.process_time() - started) / max(pairs, 1),
        "reversed": reversed_pairs,
        "near": near,
    }


def main() -> None:
    """Load the accuracy bench, align its low-resolution pairs, print recall and negatives."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy.lowres_align", description=__doc__
    )
    parser.add_argument(
        "--cache", type=Path, default=CACHE, help="cache folder (default: bench/.cache)"
    )
    parser.add_argument("--seed", type=int, default=0, help="dataset seed (default: %(default)s)")
    parser.add_argument("--before", type=Path, help="another checkout, measured in the same run")
    parser.add_argument(
        "--every", type=int, default=1, help="align every n-th copy only (default: all)"
    )
    args = parser.parse_args()
    from splitaudit.indexer.match.verify import verify_thumbnail

    dataset = load_dataset(dataset_root(args.cache, args.seed), args.seed)
    queries = [q for q in dataset.select("query") if q.subset == "lowres"][:: args.every]
    corpus = [c for c in dataset.select("corpus") if c.subset == "lowres"]
    labels = pair_labels(queries, corpus)
    images = [Image.open(dataset.path(q)).convert("RGB") for q in queries]
    thumbs = np.stack(
        [verify_thumbnail(Image.open(dataset.path(c)).convert("RGB")) for c in corpus]
    )
    edits = [q.transform for q in queries]
    versions = {"before": args.before} if args.before is not None else {}
    versions["after"] = None
    results = {
        name: measure(_module(path), images, thumbs, labels, edits)
        for name, path in versions.items()
    }
    print(
        f"\nlow-res alignment on bench.accuracy (seed {args.seed}): {len(queries)} copies x "
        f"{len(corpus)} corpus thumbnails\n"
    )
    names = list(results)
    print(
        "| edit | n | "
        + " | ".join(f"{n} (aligned >= {results[n]['near']:.2f})" for n in names)
        + " |"
    )
    print("|---|---|" + "---|" * len(names))
    for edit in sorted(next(iter(results.values()))["found"]):  # type: ignore[call-overload]
        cells = [results[n]["found"][edit] for n in names]  # type: ignore[index]
        print(f"| {edit} | {cells[0][1]} | " + " | ".join(str(c[0]) for c in cells) + " |")
    for key, label in (
        ("best_negative", "best negative score (under the cut: an upper bound)"),
        ("over", "negatives at ALIGNED_NEAR or more"),
        ("negatives", "negative pairs"),
        ("us_per_pair", "us CPU per pair"),
        ("reversed", "pairs aligned the other way round too"),
    ):
        cells = [results[n][key] for n in names]
        print(
            f"| {label} | - | "
            + " | ".join(f"{c:.3f}" if isinstance(c, float) else str(c) for c in cells)
            + " |"
        )


if __name__ == "__main__":
    main()
