"""``hf://datasets/...`` resolved through huggingface_hub against a cache laid out like the hub's."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub.constants
import pytest
from conftest import photo
from helpers.hf_layout import HFRows, jpeg, write_hub_cache, write_parquet

from splitaudit.indexer.errors import InputError
from splitaudit.indexer.sources.hf_hub import HFDatasetRef, resolve_hf_uri
from splitaudit.indexer.sources.hf_parquet import HFParquetSource
from splitaudit.indexer.sources.open import open_source, open_split


def _rows(n: int) -> HFRows:
    return HFRows(
        images=[jpeg(photo(i, (32, 32))) for i in range(n)],
        labels=[i % 2 for i in range(n)],
        captions=[f"c{i}" for i in range(n)],
        names=("cat", "dog"),
    )


@pytest.fixture
def hub_cache(tmp_path: Path) -> Path:
    """A hub cache holding acme/pets at main (train + test) and at tag v1 (test only)."""
    files = tmp_path / "files"
    train = write_parquet(files / "train.parquet", _rows(2))
    test = write_parquet(files / "test.parquet", _rows(3))
    cache = tmp_path / "hub"
    write_hub_cache(
        cache,
        "acme/pets",
        {
            "data/train-00000-of-00001.parquet": train,
            "data/test-00000-of-00001.parquet": test,
            "README.md": test,
        },
    )
    write_hub_cache(cache, "acme/pets", {"data/test-00000-of-00001.parquet": test}, revision="v1")
    return cache


@pytest.mark.parametrize(
    ("spec", "ref"),
    [
        ("hf://datasets/acme/pets", HFDatasetRef("acme/pets", None, "")),
        ("hf://datasets/acme/pets@v1/data", HFDatasetRef("acme/pets", "v1", "data")),
        (
            "hf:/datasets/acme/pets/data/test-*.parquet",
            HFDatasetRef("acme/pets", None, "data/test-*.parquet"),
        ),
    ],
)
def test_uris_parse(spec: str, ref: HFDatasetRef) -> None:
    assert HFDatasetRef.parse(spec) == ref


@pytest.mark.parametrize(
    "spec", ["hf://models/acme/x", "hf://datasets/acme", "hf://datasets/a/b/../c"]
)
def test_bad_uris_say_the_expected_shape(spec: str) -> None:
    with pytest.raises(InputError, match=r"hf://datasets/OWNER/NAME|'\.\.' is not allowed"):
        HFDatasetRef.parse(spec)


def test_offline_cache_resolves_revisions_and_paths(hub_cache: Path) -> None:
    main = Path(resolve_hf_uri("hf://datasets/acme/pets", cache_dir=hub_cache, offline=True))
    tagged = Path(
        resolve_hf_uri("hf://datasets/acme/pets@v1/data", cache_dir=hub_cache, offline=True)
    )

    assert (main / "data" / "train-00000-of-00001.parquet").is_file()
    assert sorted(p.name for p in tagged.iterdir()) == ["test-00000-of-00001.parquet"]
    with pytest.raises(InputError, match=r"not in the Hugging Face cache.*hf download acme/other"):
        resolve_hf_uri("hf://datasets/acme/other", cache_dir=hub_cache, offline=True)
    with pytest.raises(InputError, match="no file or folder 'nope'"):
        resolve_hf_uri("hf://datasets/acme/pets/nope", cache_dir=hub_cache, offline=True)


def test_open_source_and_split_read_the_cached_snapshot(
    hub_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # huggingface_hub reads HF_HUB_CACHE at import; point its default at the fake cache.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache))

    corpus = open_source("hf://datasets/acme/pets")
    split = open_split("hf://datasets/acme/pets/data/test-*.parquet")
    records = [r for shard in split.shards() for r in split.records(shard)]

    assert isinstance(corpus, HFParquetSource)
    assert len([s for s in corpus.shards()]) == 2
    assert [r.label for r in records] == ["cat", "dog", "cat"]
    # The stored address is the local snapshot: re-opening a split needs no hub.
    assert "hf://" not in split.uri and Path(records[0].locator.path or "").is_file()
    assert records[2].locator.read_bytes() == jpeg(photo(2, (32, 32)))
