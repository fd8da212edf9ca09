"""Indexing workers hand the embedder its crop: the geometry read off the embedder, same vectors."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import open_clip
import pytest
from conftest import photo

from splitaudit.indexer.embed.loader import load_embedder
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.features.embed_input import ResizeCrop
from splitaudit.indexer.pipeline.extract import Extractor, embed_input_of
from splitaudit.indexer.sources.record import Locator, Record


def _described(geometry: list[dict[str, Any]]) -> Any:
    """An embedder whose preprocess is a cached export's (plain-data description)."""
    return SimpleNamespace(preprocess=SimpleNamespace(description={"geometry": geometry}))


RESIZE = {"op": "resize", "size": [224], "max_size": None, "resample": 3}


def test_geometry_is_read_off_a_described_preprocess() -> None:
    crop = {"op": "center_crop", "size": [224, 200]}
    got = embed_input_of(_described([RESIZE, crop]))
    assert got == ResizeCrop(size=224, crop_height=224, crop_width=200, resample=3)


@pytest.mark.parametrize(
    "geometry",
    [
        [RESIZE],  # no crop: the whole resized image
        [{**RESIZE, "size": [224, 224]}, {"op": "center_crop", "size": [224, 224]}],  # squash
        [{**RESIZE, "max_size": 300}, {"op": "center_crop", "size": [224, 224]}],
        [RESIZE, {"op": "center_crop", "size": [256, 256]}],  # padded crop
        [{**RESIZE, "resample": 0}, {"op": "center_crop", "size": [224, 224]}],  # nearest
    ],
)
def test_other_geometry_keeps_the_working_copy(geometry: list[dict[str, Any]]) -> None:
    assert embed_input_of(_described(geometry)) is None


def test_no_embedder_or_preprocess_means_no_crop() -> None:
    assert embed_input_of(None) is None
    assert embed_input_of(SimpleNamespace()) is None  # type: ignore[arg-type]


def test_torch_transform_is_described() -> None:
    """An eager embedder's torchvision transform (open_clip's eval transform) is read too."""
    transform = open_clip.image_transform(224, is_train=False)
    embedder = SimpleNamespace(preprocess=SimpleNamespace(transform=transform))
    assert embed_input_of(embedder) == ResizeCrop(224, 224, 224, 3)  # type: ignore[arg-type]


def test_workers_crop_gives_the_working_copys_vectors(tmp_path: Path, tiny_model_spec: str) -> None:
    embedder = load_embedder(tiny_model_spec)
    crop = embed_input_of(embedder)
    assert crop is not None
    records = []
    for i, size in enumerate([(500, 375), (375, 500), (876, 502), (200, 150), (1200, 300)]):
        path = tmp_path / f"{i}.jpg"
        photo(i, size).save(path, quality=90)
        records.append(
            Record(key=path.name, source="t", shard="s", locator=Locator("file", path=str(path)))
        )
    with Extractor(workers=2, keep_image=True, embed_input=crop) as pool:
        got = [e for batch in pool.map_batches(iter([records[:3], records[3:]])) for e in batch]
    assert all(
        e.image is not None and e.image.size == (crop.crop_width, crop.crop_height) for e in got
    )
    fused = embedder.embed([e.image for e in got])  # type: ignore[misc]
    working = embedder.embed(
        [decode_image(Path(r.locator.path).read_bytes()).image for r in records]
    )  # type: ignore[arg-type]
    cosines = (fused * working).sum(axis=1)
    assert cosines.min() >= 0.999
    # and the features are those of a run without the crop
    with Extractor(workers=1, keep_image=True) as serial:
        plain = [e for batch in serial.map_batches(iter([records])) for e in batch]
    assert [e.features for e in got] == [e.features for e in plain]
    assert not np.allclose(fused[0], fused[1])  # distinct images, distinct vectors
