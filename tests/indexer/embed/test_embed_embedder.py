"""Tests for ``OpenClipEmbedder`` and its batched preprocessing, with a test-double encoder."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.embed.embedder import BatchPreprocess, OpenClipEmbedder


def _image(seed: int, size: tuple[int, int], mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    w, h = size
    return Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).convert(mode)


@pytest.mark.parametrize("resize_mode", ["shortest", "longest", "squash"])
@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear"])
def test_batch_preprocess_matches_per_image_transform(resize_mode: str, interpolation: str) -> None:
    import open_clip
    import torch

    transform = open_clip.image_transform(
        64,
        is_train=False,
        mean=(0.4, 0.5, 0.6),
        std=(0.2, 0.25, 0.3),
        resize_mode=resize_mode,
        interpolation=interpolation,
    )
    images = [_image(0, (100, 60)), _image(1, (64, 64)), _image(2, (33, 90)), _image(3, (300, 200))]
    expected = torch.stack([transform(image) for image in images])
    got = BatchPreprocess(transform)(images)
    assert got.shape == (4, 3, 64, 64)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_batch_preprocess_falls_back_for_unknown_transforms() -> None:
    import torch

    def transform(image: Image.Image) -> torch.Tensor:
        return torch.full((3, 2, 2), float(image.width))

    out = BatchPreprocess(transform)([_image(0, (5, 5)), _image(1, (7, 5), "L")])
    assert out[:, 0, 0, 0].tolist() == [5.0, 7.0]


def _embedder(batch_size: int) -> OpenClipEmbedder:
    import open_clip
    import torch

    def encode_image(batch: torch.Tensor) -> torch.Tensor:
        # test double: per-channel means plus a constant, so rows are never zero
        return torch.cat([batch.mean(dim=(2, 3)), torch.ones(len(batch), 1)], dim=1)

    transform = open_clip.image_transform(32, is_train=False)
    return OpenClipEmbedder(
        encode_image, transform, model_id="double:v1", dim=4, batch_size=batch_size
    )


def test_embed_batches_and_normalises() -> None:
    images = [_image(i, (40 + i, 30)) for i in range(5)]
    one_batch = _embedder(batch_size=32).embed(images)
    small_batches = _embedder(batch_size=2).embed(images)
    assert one_batch.shape == (5, 4)
    assert one_batch.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(one_batch, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(small_batches, one_batch, atol=1e-6)
    assert len({tuple(row) for row in one_batch.round(5)}) == 5


def test_embed_empty_input() -> None:
    out = _embedder(batch_size=4).embed([])
    assert out.shape == (0, 4)
    assert out.dtype == np.float32


def test_encoder_with_wrong_width_is_reported() -> None:
    import open_clip
    import torch

    def encode_image(batch: torch.Tensor) -> torch.Tensor:
        return torch.ones(len(batch), 3)

    embedder = OpenClipEmbedder(
        encode_image, open_clip.image_transform(32, is_train=False), model_id="bad", dim=4
    )
    with pytest.raises(RuntimeError, match=r"expected \(n, 4\)"):
        embedder.embed([_image(0, (32, 32))])


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        _embedder(batch_size=0)
