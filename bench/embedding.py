"""Embedding throughput: ``load_embedder(...).embed(images)`` against a bare forward pass.

Run: ``.venv/bin/python -m bench.embedding [--model efficientnet-lite0] [--n 256]
[--batch-size 32] [--rounds 5] [--threads N] [--min-side 256 --max-side 640] [--device cpu]``

All figures come from one run on the same images:

- images: random crops of the offline sample photos (``bench.photos.source_photos``), resized
  so the long side is uniform in ``[--min-side, --max-side]`` (what a draft-decoded JPEG
  looks like when it reaches the embedder), decoded PIL RGB images held in memory;
- pipeline: ``embedder.embed(images)``: preprocess (resize, crop, normalise), batches of
  ``--batch-size``, forward, L2 normalisation, float32 numpy out;
- bare: ``embedder.encode_image(batch)`` under ``torch.inference_mode()`` on the same
  images preprocessed beforehand (outside the timer), same batches;
- preprocess: the preprocessing step alone, for attribution.

Rounds alternate bare / pipeline (after one warm-up round each); the median is reported, and
the ratio of the fastest rounds too (on a shared machine the fastest round is the least disturbed).
Target (issue "Indexer"): pipeline overhead over the bare forward <= 15%.

``--backends`` compares eager torch with ONNX Runtime and OpenVINO instead (``bench/backends.py``).

``--crop-cosines`` compares, per image of the bench photo sets (``bench.index_vs_fastdup``'s
``photos`` and ``small``, first ``--n``), the vector of the 256-px working copy run through the
model's own resize and crop (what audits embed) with the vector of the indexing workers' crop
(``ResizeCrop.apply`` on the decode), and prints the median and lowest cosine and the CPU
milliseconds per image of each way of making the input.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from bench.images import make_images
from splitaudit.indexer.embed import load_embedder
from splitaudit.indexer.embed.embedder import OpenClipEmbedder

TARGET_OVERHEAD = 0.15


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Measure and print images/s for the pipeline, the bare forward and preprocessing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="efficientnet-lite0")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    parser.add_argument("--min-side", type=int, default=256)
    parser.add_argument("--max-side", type=int, default=640)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--backends",
        action="store_true",
        help="compare inference backends instead (see bench/backends.py)",
    )
    parser.add_argument(
        "--cli-n", type=int, default=1000, help="--backends: JPEGs for the whole-CLI run"
    )
    parser.add_argument("--skip-cli", action="store_true", help="--backends: forward passes only")
    parser.add_argument(
        "--skip-forward", action="store_true", help="--backends: the whole-CLI table only"
    )
    parser.add_argument(
        "--cli-baseline-ref",
        default="9780ee4",
        help="--backends: release timed beside the CLI runs (default 0.1.0; '' for none)",
    )
    parser.add_argument("--skip-fastdup", action="store_true", help="--backends: leave fastdup out")
    parser.add_argument(
        "--crop-cosines",
        action="store_true",
        help="cosine of the workers' crop vs the working copy's vectors (bench photo sets)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.crop_cosines:
        crop_cosines(args.model, args.n)
        return
    if args.backends:
        from bench.backends import main as backends_main

        backends_main(args)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    embedder = load_embedder(args.model, device=args.device, batch_size=args.batch_size)
    assert isinstance(embedder, OpenClipEmbedder)
    images = make_images(args.n, args.min_side, args.max_side)
    chunks = [images[i : i + args.batch_size] for i in range(0, len(images), args.batch_size)]
    batches = [embedder.preprocess(chunk) for chunk in chunks]
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def bare() -> None:
        with torch.inference_mode():
            for batch in batches:
                embedder.encode_image(batch.to(args.device))
        sync()

    def pipeline() -> None:
        embedder.embed(images)
        sync()

    def preprocess() -> None:
        for chunk in chunks:
            embedder.preprocess(chunk)

    # same numbers both ways (the pipeline adds only normalisation)
    ref = torch.nn.functional.normalize(
        torch.cat([embedder.encode_image(b) for b in batches[:1]]), dim=-1
    )
    np.testing.assert_allclose(embedder.embed(chunks[0]), ref.detach().cpu().numpy(), atol=1e-4)

    bare()  # warm-up
    pipeline()
    times: dict[str, list[float]] = {"bare": [], "pipeline": [], "preprocess": []}
    for _ in range(args.rounds):
        times["bare"].append(_timed(bare))
        times["pipeline"].append(_timed(pipeline))
        times["preprocess"].append(_timed(preprocess))
    med = {name: statistics.median(values) for name, values in times.items()}

    print(
        f"model {embedder.model_id} (dim {embedder.dim}) on {args.device}, "
        f"torch threads {torch.get_num_threads()}, {args.n} images "
        f"(long side {args.min_side}-{args.max_side} px), batch {args.batch_size}, "
        f"median of {args.rounds} rounds"
    )
    for name in ("bare", "pipeline", "preprocess"):
        spread = f"{min(times[name]):.3f}-{max(times[name]):.3f}"
        print(
            f"  {name:<10} {args.n / med[name]:8.1f} images/s   ({med[name]:.3f} s; range {spread} s)"
        )
    overhead = med["pipeline"] / med["bare"] - 1.0
    verdict = "ok" if overhead <= TARGET_OVERHEAD else "OVER TARGET"
    print(
        f"  pipeline / bare = {med['pipeline'] / med['bare']:.3f}x -> overhead {overhead:+.1%} "
        f"(target <= {TARGET_OVERHEAD:.0%}: {verdict})"
    )
    best = min(times["pipeline"]) / min(times["bare"]) - 1.0
    print(f"  fastest rounds: pipeline / bare = {best + 1:.3f}x -> overhead {best:+.1%}")
    print(f"  preprocess alone = {med['preprocess'] / med['bare']:.1%} of the bare forward time")


def crop_cosines(model: str, n: int) -> None:
    """Median / lowest cosine between the two embedding inputs, and what each costs to make."""
    from bench.index_vs_fastdup import image_sets
    from splitaudit.indexer.features.decode import decode_image
    from splitaudit.indexer.pipeline.extract import embed_input_of

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = load_embedder(model)
    crop = embed_input_of(embedder)
    if crop is None:
        raise SystemExit(f"{model}: its eval geometry is not a short-side resize + centre crop")
    for name, folder in image_sets(1000).items():
        decoded = [decode_image(p.read_bytes()) for p in sorted(folder.glob("*.jpg"))[:n]]
        cpu = time.process_time()
        working = [d.image for d in decoded]
        cpu_fit = time.process_time() - cpu
        cpu = time.process_time()
        for image in working:  # the model's own resize and crop, as the embedder runs them
            for step in embedder.preprocess._geometry or []:
                image = step(image)
        cpu_model = time.process_time() - cpu
        cpu = time.process_time()
        cropped = [crop.apply(d.decoded) for d in decoded]
        cpu_crop = time.process_time() - cpu
        cosines = (embedder.embed(working) * embedder.embed(cropped)).sum(axis=1)
        print(
            f"{name}: {len(decoded)} images, cosine median {np.median(cosines):.7f} lowest "
            f"{cosines.min():.7f}; CPU ms/img to make the input: 256-px copy "
            f"{1000 * cpu_fit / len(decoded):.2f} + the model's resize and crop "
            f"{1000 * cpu_model / len(decoded):.2f}, the workers' crop "
            f"{1000 * cpu_crop / len(decoded):.2f}"
        )


if __name__ == "__main__":
    main()
