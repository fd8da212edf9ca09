"""``python -m bench.index_stages``: CPU per image of each stage of an indexing run, in one process.

Replays what ``splitaudit index --model efficientnet-lite0 --backend openvino`` does to each
image, stage by stage, on the files ``bench.index_vs_fastdup`` uses, and prints process CPU
milliseconds per image (``time.process_time``: every thread of this process). Worker stages:
read, decode, SHA-256 of the bytes, pixel digest, stream digest, EXIF / text fields, pHash +
dHash, the embedder's crop, pickling the result (the pool's IPC); main-process stages:
unpickling, the batch normalisation, the forward pass (batches of 8) and the item rows. The
whole-process figures (imports, the DB, the pool) are ``bench.index_vs_fastdup``'s.

``--forward-variants`` times the OpenVINO runner's settings on the same batch instead, rounds
alternating (process CPU ms per image, median and lowest): the dynamic-batch graph with a
batch of 8 split over the streams (the setting before) against requests of one image on the
model reshaped to a static batch, on one and on two streams.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import pickle
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from bench.index_vs_fastdup import image_sets

Stages = dict[str, float]


def _timed(totals: Stages, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    start = time.process_time()
    out = fn(*args)
    totals[name] += time.process_time() - start
    return out


def _decode_only(data: bytes) -> Image.Image:
    opened = Image.open(io.BytesIO(data))
    opened.draft("RGB", (256, 256))
    opened.load()
    return opened


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def worker_stages(paths: list[Path], embed_input: Any) -> tuple[Stages, list[Image.Image]]:
    """CPU seconds of each worker stage over ``paths``, and the crops they hand over."""
    from splitaudit.indexer.features.decode import pixel_digest
    from splitaudit.indexer.features.jpeg_stream import jpeg_stream_digest
    from splitaudit.indexer.features.perceptual import perceptual_hashes
    from splitaudit.indexer.features.textfields import extract_text_fields
    from splitaudit.indexer.pipeline.extract import extract_record
    from splitaudit.indexer.sources.folder import FolderSource

    totals: Stages = defaultdict(float)
    crops = []
    for path in paths:
        data = _timed(totals, "read bytes", path.read_bytes)

        decoded = _timed(totals, "JPEG decode", _decode_only, data)
        _timed(totals, "text fields (EXIF)", extract_text_fields, decoded)
        _timed(totals, "SHA-256 of bytes", _sha256, data)
        _timed(totals, "pixel digest", pixel_digest, decoded)
        _timed(totals, "stream digest", jpeg_stream_digest, data)
        _timed(totals, "pHash + dHash", perceptual_hashes, decoded)
        crops.append(_timed(totals, "embedder crop", embed_input.apply, decoded))
    # the whole worker path once more, as the pool runs it, to check the parts add up
    source = FolderSource(paths[0].parent)
    records = [r for shard in source.shards() for r in source.records(shard)]
    records = [r for r in records if Path(r.locator.uri()).name in {p.name for p in paths}]
    extracted = []
    start = time.process_time()
    for record in records:
        extracted.append(extract_record(record, keep_image=True, embed_input=embed_input))
    totals["= extract_record (whole)"] = time.process_time() - start
    blobs = _timed(totals, "pickle (to main)", lambda: [pickle.dumps(e) for e in extracted])
    _timed(totals, "unpickle (main)", lambda: [pickle.loads(b) for b in blobs])
    return totals, crops


def main_stages(crops: list[Image.Image], embedder: Any, batch: int) -> Stages:
    """CPU seconds of the main process's stages over the crops (forward batches of ``batch``)."""
    totals: Stages = defaultdict(float)
    for i in range(0, len(crops), batch):
        chunk = crops[i : i + batch]
        arr = _timed(totals, "normalise (NCHW float32)", embedder.preprocess, chunk)
        _timed(totals, "forward (OpenVINO)", embedder.embed_array, arr)
    return totals


def forward_variants(embedder: Any, folder: Path, crops: list[Image.Image], rounds: int) -> None:
    """Print CPU ms per image of the runner settings on ``crops`` (see the module docstring)."""
    import statistics

    import numpy as np

    from splitaudit.indexer.embed.backends.openvino import OpenVinoRunner

    batch = embedder.preprocess(crops)
    variants = {
        "dynamic, 8 per call, 2 streams": (OpenVinoRunner(folder, threads=2, streams=2), 8),
        "static 1, 2 streams": (
            OpenVinoRunner(folder, threads=2, streams=2, request_batch=1),
            8,
        ),
        "static 1, 1 stream": (OpenVinoRunner(folder, threads=1, streams=1, request_batch=1), 8),
    }
    reference = variants["dynamic, 8 per call, 2 streams"][0](batch[:8])
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(variants)[::-1]
        for name in order:
            runner, size = variants[name]
            start = time.process_time()
            for i in range(0, len(batch), size):
                runner(batch[i : i + size])
            times[name].append((time.process_time() - start) / len(batch) * 1000)
    for name, (runner, _) in variants.items():
        diff = float(np.abs(runner(batch[:8]) - reference).max())
        print(
            f"  {name:<32} median {statistics.median(times[name]):6.2f}  lowest "
            f"{min(times[name]):6.2f} CPU ms/img  (max |diff| vs dynamic {diff:.1e})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--sets", default="small,photos")
    parser.add_argument("--home", type=Path, help="a home whose export cache to reuse")
    parser.add_argument("--forward-variants", action="store_true")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --forward-variants")
    args = parser.parse_args()
    from splitaudit.indexer.embed.backends import load_embedder_on_backend
    from splitaudit.indexer.embed.backends.cache import ExportCache
    from splitaudit.indexer.embed.backends.runners import runner_threads
    from splitaudit.indexer.embed.device import cpu_embed_batch
    from splitaudit.indexer.pipeline.extract import embed_input_of

    threads = runner_threads()  # OMP_NUM_THREADS=1 for one
    batch = cpu_embed_batch(threads)
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp)
        embedder = load_embedder_on_backend(
            "efficientnet-lite0",
            backend="openvino",
            cache_dir=home / "exports",
            batch_size=batch,
        )
        embed_input = embed_input_of(embedder)
        entry = ExportCache(home / "exports").entry_dir("openvino", embedder.export_key)
        folders = image_sets(1000)
        for name in args.sets.split(","):
            paths = sorted(folders[name].glob("*.jpg"))[: args.n]
            stages, crops = worker_stages(paths, embed_input)
            if args.forward_variants:
                print(f"\n{name}: forward of {len(crops)} crops, {args.rounds} rounds")
                forward_variants(embedder, entry, crops, args.rounds)
                continue
            stages.update(main_stages(crops, embedder, batch))
            print(f"\n{name}: {len(paths)} JPEGs, CPU ms per image ({threads} inference threads)")
            for stage, seconds in stages.items():
                print(f"  {stage:<28}{seconds / len(paths) * 1000:8.2f}")


if __name__ == "__main__":
    main()
