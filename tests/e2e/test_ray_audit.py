"""``splitaudit audit --executor ray`` on a local Ray cluster (two worker processes) reports the
local executor's matches, item for item, with the same evidence."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import photo
from helpers.overlay_images import inset
from helpers.planted_dedup import bordered, plant
from helpers.ray_cluster import local_ray_cluster
from PIL import ImageOps

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.pipeline.ray_match import (
    AnsweredFloats,
    batch_bounds,
    match_bounds,
    search_blocks,
    slice_state,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    with local_ray_cluster(cpus=2) as address:
        yield address


def _split(root: Path, corpus: Path) -> Path:
    """Edited copies of corpus photos (resized, mirrored, bordered, recompressed, exact, inset
    in a slide, a thumbnail) and unrelated photos: near, exact and unmatched rows."""
    root.mkdir()
    orig = {n: ImageOps.exif_transpose(photo(n, (256, 192))) for n in range(4)}
    orig[0].resize((200, 150)).save(root / "t0_small.jpg", quality=85)
    ImageOps.mirror(orig[1]).save(root / "t1_mirror.jpg", quality=90)
    bordered(orig[2]).save(root / "t2_border.jpg", quality=90)
    orig[3].save(root / "t3_jpeg.jpg", quality=30)
    (root / "t4_exact.png").write_bytes((corpus / "orig0.png").read_bytes())
    # a large slide holding a corpus photo: its region embeddings nominate it
    inset(orig[2], 0.4, (430, 160))[0].save(root / "t5_slide.png")
    # a thumbnail: small test images get SMALL_TOP_K embedding candidates, the others TOP_K of
    # the same round-1 search (a batch without a small row is answered from its first columns)
    orig[1].resize((64, 48)).save(root / "t6_thumb.png")
    for seed in range(300, 305):
        photo(seed, (240, 180)).save(root / f"u{seed}.jpg", quality=90)
    return root


def _audit(runner: CliRunner, split: Path, home: Path, out: Path, *extra: str) -> dict[str, Any]:
    args = ["audit", str(split), "--corpus", "c", "--home", str(home), "--json", str(out)]
    result = runner.invoke(cli, [*args, "--threshold", "candidate_cosine=-1", *extra])
    assert result.exit_code in (0, 1), result.output
    return dict(json.loads(out.read_text()))


def _matches(report: dict[str, Any]) -> dict[str, list[tuple]]:
    """Each test item's matches: corpus key, kind and evidence (sorted)."""
    return {
        it["key"]: sorted(
            (m["corpus_key"], m["kind"], json.dumps(m["evidence"], sort_keys=True))
            for m in it["matches"]
        )
        for it in report["items"]
    }


def test_ray_audit_equals_local(tmp_path: Path, ray_address: str, tiny_model_spec: str) -> None:
    corpus = tmp_path / "corpus"
    plant(corpus)
    split = _split(tmp_path / "split", corpus)
    home = tmp_path / "home"
    runner = CliRunner()
    indexed = runner.invoke(
        cli,
        ["index", str(corpus), "--corpus", "c", "--home", str(home), "--model", tiny_model_spec],
    )
    assert indexed.exit_code == 0, indexed.output
    local = _audit(runner, split, home, tmp_path / "local.json")
    remote = _audit(
        runner,
        split,
        home,
        tmp_path / "ray.json",
        "--executor",
        "ray",
        "--ray-address",
        ray_address,
    )
    want = _matches(local)
    assert ("orig0.png", "exact") in {m[:2] for m in want["t4_exact.png"]}
    assert ("orig2.png", "near") in {m[:2] for m in want["t5_slide.png"]}  # geometric, inset
    assert sum(bool(v) for v in want.values()) >= 4  # the edited copies are found
    assert not any(want[f"u{seed}.jpg"] for seed in range(300, 305))
    assert _matches(remote) == want
    assert remote["summary"] == local["summary"]


def test_server_audits_refuse_the_ray_executor(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["audit", str(tmp_path), "--corpus", "c", "--server", "http://x", "--executor", "ray"],
    )
    assert result.exit_code == 2 and "--executor" in result.output


def test_search_blocks_follow_the_engine_chunks() -> None:
    # Flat: blocks start at multiples of the exact search's 1024-row query block, within each
    # 16,384-row chunk of the engine, and cover every row once.
    bounds = batch_bounds(40_000, 8)
    assert bounds[0][0] == 0 and bounds[-1][1] == 40_000
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    for start, stop in bounds:
        chunk = start // 16_384
        assert (stop - 1) // 16_384 == chunk
        assert (start - chunk * 16_384) % 1024 == 0
    assert len(batch_bounds(900, 4)) == 1  # one query block: one search
    # IVF: round 1 searches the engine's chunks themselves (coarse step and list products
    # depend on the batch); Flat: 4,096-row blocks of them
    ivf = SimpleNamespace(floats=SimpleNamespace(is_exact=False))
    assert search_blocks(16_384 + 5_000, ivf) == [(0, 16_384), (16_384, 21_384)]  # type: ignore[arg-type]
    flat = SimpleNamespace(floats=SimpleNamespace(is_exact=True))
    assert search_blocks(10_000, flat) == [(0, 4096), (4096, 8192), (8192, 10_000)]  # type: ignore[arg-type]
    rows = match_bounds(10, 8)
    assert [b - a for a, b in rows] == [2, 2, 2, 2, 2] and rows[-1][1] == 10


def test_slice_and_answered_search_keep_rows_aligned() -> None:
    from splitaudit.indexer.match.split_state import SplitState
    from splitaudit.indexer.store.float_index import FloatStore

    n = 6
    state = SplitState(
        ids=np.arange(10, 10 + n, dtype=np.int64),
        keys=[f"k{i}" for i in range(n)],
        labels=[None] * n,
        sha256=[f"s{i}" for i in range(n)],
        pixel=[None] * n,
        stream=[None] * n,
        phash=np.arange(n, dtype=np.uint64),
        phash_mirror=np.arange(n, dtype=np.uint64),
        min_side=np.full(n, 100, np.int32),
        thumbs=np.zeros((n, 32, 32), np.uint8),
        images={1: "one", 4: "four"},  # type: ignore[dict-item]
    )
    state.vectors = {
        "m": np.arange(n * 2, dtype=np.float32).reshape(n, 2),
        "other": np.zeros((n, 2)),
    }
    from splitaudit.indexer.match.inset_candidates import RegionVectors

    region_rows = np.asarray([1, 4, 4, 7])
    boxes = np.asarray([[0.0, 0.0, 0.5, 0.5], [0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 1, 1], [0, 0, 1, 1]])
    state.regions = {"m": RegionVectors(region_rows, np.eye(4, dtype=np.float32), boxes)}
    part = slice_state(state, 3, 6, models=("m",))
    # a batch's regions: its rows' only, renumbered, each with its own box
    assert part.regions["m"].rows.tolist() == [1, 1]
    assert part.regions["m"].boxes.tolist() == [[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 1, 1]]
    assert part.regions["m"].vectors.tolist() == np.eye(4)[1:3].tolist()
    assert part.ids.tolist() == [13, 14, 15] and part.keys == ["k3", "k4", "k5"]
    assert part.images == {1: "four"} and len(part.thumbs) == 3
    assert list(part.vectors) == ["m"] and part.vectors["m"][0].tolist() == [6.0, 7.0]
    base = FloatStore.create(model_id="m", dim=4)
    vecs = np.eye(4, dtype=np.float32)
    base.add(np.array([7, 8, 9, 10]), vecs)
    scores = np.full((2, 10), 0.5, np.float32)
    ids = np.full((2, 10), 99, np.int64)
    answered = AnsweredFloats(base, [(vecs[:2], scores, ids)])
    assert answered.search(vecs[:2], 10)[1][0, 0] == 99  # the precomputed answer
    assert answered.search(vecs[2:], 10)[1][0, 0] == 9 and answered.fallbacks == 2
    # a split searched at SMALL_TOP_K answers a batch asking TOP_K from its first columns
    wide = AnsweredFloats(
        base,
        [
            (
                vecs[:2],
                np.tile(np.linspace(1, 0, 50, dtype=np.float32), (2, 1)),
                np.tile(np.arange(50), (2, 1)),
            )
        ],
    )
    cut_scores, cut_ids = wide.search(vecs[:2], 10)
    assert cut_ids.shape == (2, 10) and cut_ids[0].tolist() == list(range(10))
    assert cut_scores[0, 0] == 1.0 and wide.fallbacks == 0
