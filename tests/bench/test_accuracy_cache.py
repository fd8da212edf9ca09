"""bench.accuracy keeps each seed's benchmark in its own cache folder: a run of another seed
neither rebuilds over nor reads a cached benchmark of the first."""

import json
from pathlib import Path

from bench.accuracy.dataset import DATASET_VERSION, dataset_root, load_dataset


def _cached(root: Path, seed: int) -> None:
    """A cached benchmark of ``seed`` under ``root`` (an empty manifest: loaded, not rebuilt)."""
    root.mkdir(parents=True)
    manifest = {"version": DATASET_VERSION, "seed": seed, "items": []}
    (root / "manifest.json").write_text(json.dumps(manifest))


def test_each_seed_has_its_own_cache_folder(tmp_path: Path) -> None:
    first, second = dataset_root(tmp_path, 0), dataset_root(tmp_path, 1)
    assert first != second
    assert not first.is_relative_to(second) and not second.is_relative_to(first)
    assert first.is_relative_to(tmp_path / "accuracy")
    assert dataset_root(tmp_path, 1) == second  # the same seed finds its cache again


def test_two_seeds_cached_side_by_side_both_load_without_a_rebuild(tmp_path: Path) -> None:
    for seed in (0, 1):
        _cached(dataset_root(tmp_path, seed), seed)
    for seed in (0, 1):
        root = dataset_root(tmp_path, seed)
        dataset = load_dataset(root, seed)
        assert dataset.root == root and dataset.items == ()
        assert json.loads((root / "manifest.json").read_text())["seed"] == seed
