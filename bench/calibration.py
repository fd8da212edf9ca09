"""Index-time threshold calibration: its cost against the index itself, and the cosines it picks.

``python -m bench.calibration [--synthetic N] [--lowres N] [--model SPEC]`` indexes three
corpora with the model (efficientnet-lite0 by default, whose thresholds ``bench.accuracy``
measured), then runs the corpus calibration (``splitaudit.indexer.match.corpus_thresholds``) on each,
forced to calibrate rather than use the measured values:

- **bench photos**: the real photographs available offline (``bench.accuracy.photos``);
- **synthetic photos**: ``splitaudit.indexer.demo.synthetic_photo`` scenes at 320x240 (N of them);
- **low-res**: 32-64 px crops of the synthetic photos (CIFAR / Tiny-ImageNet size).

It prints, per corpus, the index time, the calibration time and their ratio, the calibration
cost extrapolated to 100k items (the samples are capped, so it grows only by reading the
vector files), and the picked cosines next to the measured defaults.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from splitaudit.indexer.db.models import Corpus
from splitaudit.indexer.demo import synthetic_photo
from splitaudit.indexer.match.corpus_thresholds import calibrate_corpus_thresholds
from splitaudit.indexer.match.thresholds import DEFAULT_THRESHOLDS
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.workspace import Workspace

PER = 100_000


def _bench_photos(folder: Path) -> int:
    from bench.accuracy.photos import collect_photos

    folder.mkdir(parents=True)
    photos = collect_photos()
    for i, p in enumerate(photos):
        p.image.convert("RGB").save(folder / f"photo{i:03d}.jpg", quality=92)
    return len(photos)


def _synthetic(folder: Path, n: int) -> int:
    folder.mkdir(parents=True)
    for i in range(n):
        synthetic_photo(10_000 + i, (320, 240)).save(folder / f"s{i:06d}.jpg", quality=88)
    return n


def _lowres(folder: Path, n: int) -> int:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        side = int(rng.choice([32, 48, 64]))
        src = synthetic_photo(50_000 + i, (160, 120))
        x, y = int(rng.integers(0, 40)), int(rng.integers(0, 20))
        tile: Image.Image = src.crop((x, y, x + 100, y + 100)).resize(
            (side, side), Image.Resampling.BICUBIC
        )
        tile.save(folder / f"t{i:06d}.png")
    return n


def _run(name: str, folder: Path, home: Path, embedder: object, spec: str) -> dict[str, object]:
    ws = Workspace.open(home)
    try:
        started = time.perf_counter()
        summary = index_sources(
            ws,
            name,
            [FolderSource(folder)],
            embedder=embedder,  # type: ignore[arg-type]
            model_spec=spec,
        )
        index_s = time.perf_counter() - started
        with ws.sessions() as s:
            corpus = s.query(Corpus).filter_by(name=name).one()
            started = time.perf_counter()
            record = calibrate_corpus_thresholds(
                s,
                corpus,
                ws.corpus_dir(name),
                embedder,  # type: ignore[arg-type]
                force=True,
                prefer_measured=False,
            )
            cal_s = time.perf_counter() - started
    finally:
        ws.close()
    assert record is not None
    n = summary.indexed
    return {"corpus": name, "items": n, "index_s": index_s, "cal_s": cal_s, "record": record}


def _q(quantiles: dict[str, float], *names: str) -> str:
    return " / ".join(f"{quantiles.get(n, float('nan')):.3f}" for n in names)


def main() -> None:
    """Index the three corpora, calibrate each, print cost and thresholds."""
    parser = argparse.ArgumentParser(prog="python -m bench.calibration", description=__doc__)
    parser.add_argument("--model", default="efficientnet-lite0")
    parser.add_argument(
        "--synthetic", type=int, default=2000, help="synthetic photos (default 2000)"
    )
    parser.add_argument("--lowres", type=int, default=1000, help="low-res tiles (default 1000)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from splitaudit.indexer.embed.loader import load_embedder

    embedder = load_embedder(args.model)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-calibration-") as tmp:
        root = Path(tmp)
        for name, make, n in (
            ("photos", _bench_photos, None),
            ("synthetic", _synthetic, args.synthetic),
            ("lowres", _lowres, args.lowres),
        ):
            folder = root / name
            made = make(folder) if n is None else make(folder, n)  # type: ignore[operator]
            print(
                f"{name}: {made} images written, indexing with {embedder.model_id} ...", flush=True
            )
            rows.append(_run(name, folder, root / f"home-{name}", embedder, args.model))
    m = DEFAULT_THRESHOLDS
    print(
        f"\nmeasured defaults (bench.accuracy): near {m.near_cosine:.2f}, semantic "
        f"{m.semantic_cosine:.2f}, candidate {m.candidate_cosine:.2f}\n"
    )
    print(
        "| corpus | items | index s | calibration s | cal / index | cal s per 100k items* | index s per 100k "
        "| near | semantic | candidate | null q0.5 / q0.99 / ceiling | copies q0.02 / q0.5 | pairs (null / copy) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        rec = r["record"]
        n = int(r["items"])  # type: ignore[arg-type]
        index_s, cal_s = float(r["index_s"]), float(r["cal_s"])  # type: ignore[arg-type]
        index_100k = index_s / n * PER
        print(
            f"| {r['corpus']} | {n} | {index_s:.1f} | {cal_s:.1f} | {cal_s / index_s:.3f} | "
            f"{cal_s:.1f} | {index_100k:.0f} | {rec.near_cosine:.2f} | {rec.semantic_cosine:.2f} | "  # type: ignore[attr-defined]
            f"{rec.candidate_cosine:.2f} | {_q(rec.null_quantiles, 'q0.5', 'q0.99', 'ceiling')} | "  # type: ignore[attr-defined]
            f"{_q(rec.copy_quantiles, 'q0.02', 'q0.5')} | {rec.null_pairs} / {rec.copy_pairs} |"  # type: ignore[attr-defined]
        )  # type: ignore[attr-defined]
    print(
        "\n* the calibration samples at most 2,000 stored vectors and 48 images, so its cost at "
        "100k items is the measured one plus reading the vector files once (~0.4 GB for 100k x "
        "1280 float32 is seconds); ratio at 100k = that / index s per 100k."
    )
    for r in rows:
        print(f"{r['corpus']}: {r['record'].summary()}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
