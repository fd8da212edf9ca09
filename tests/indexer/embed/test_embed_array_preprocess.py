"""ArrayPreprocess replays a model's eval transform without torch, bit for bit."""

from __future__ import annotations

import numpy as np
import open_clip
import pytest
from conftest import photo
from PIL import Image
from torchvision import transforms

from splitaudit.indexer.embed.backends.array_preprocess import ArrayPreprocess, describe
from splitaudit.indexer.embed.efficientnet import load_efficientnet_lite0
from splitaudit.indexer.embed.embedder import BatchPreprocess

SIZES = [(1, 1), (7, 300), (300, 7), (224, 224), (225, 224), (224, 225), (500, 375), (96, 96)]


def _images() -> list[Image.Image]:
    images = [photo(seed, (96, 96)).resize(size) for seed, size in enumerate(SIZES)]
    base = photo(99, (333, 251))
    images += [
        base.convert("L"),
        base.convert("RGBA"),
        base.convert("P"),
        base.convert("CMYK"),
        base.convert("1"),
        base.convert("LA"),
    ]
    return images


def _assert_same(transform: transforms.Compose, images: list[Image.Image]) -> None:
    description = describe(transform)
    assert description is not None
    want = BatchPreprocess(transform)(images).numpy()
    got = ArrayPreprocess(description)(images)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got, want)  # bit for bit, not close
    assert got.flags.c_contiguous  # NCHW, as the exported runners feed it


def test_efficientnet_lite0_transform_is_replayed_bit_for_bit() -> None:
    _assert_same(load_efficientnet_lite0().preprocess, _images())


@pytest.mark.parametrize("resize_mode", ["shortest", "squash"])
def test_open_clip_transforms_are_replayed_bit_for_bit(resize_mode: str) -> None:
    transform = open_clip.image_transform(
        224,
        is_train=False,
        mean=open_clip.OPENAI_DATASET_MEAN,
        std=open_clip.OPENAI_DATASET_STD,
        resize_mode=resize_mode,
    )
    _assert_same(transform, _images())


@pytest.mark.parametrize(
    "geometry",
    [
        [
            transforms.Resize(64, interpolation=transforms.InterpolationMode.BILINEAR, max_size=80),
            transforms.CenterCrop(48),
        ],
        [transforms.Resize((40, 70), interpolation=transforms.InterpolationMode.LANCZOS)],
        [transforms.CenterCrop(400)],  # larger than most images: zero padding
        [transforms.CenterCrop((31, 57))],
    ],
    ids=["max-size", "squash-lanczos", "pad", "odd-crop"],
)
def test_other_resize_and_crop_settings_are_replayed_bit_for_bit(
    geometry: list[object],
) -> None:
    transform = transforms.Compose(
        [*geometry, transforms.ToTensor(), transforms.Normalize((0.1, 0.2, 0.3), (0.4, 0.5, 0.6))]
    )
    _assert_same(transform, _images())


def test_a_transform_with_another_step_is_not_described() -> None:
    normalise = [transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.5,) * 3)]
    assert describe(transforms.Compose([transforms.RandomCrop(32), *normalise])) is None
    assert describe(transforms.Compose([transforms.Lambda(lambda x: x), *normalise])) is None
    assert describe(transforms.Compose([transforms.Resize(32), transforms.ToTensor()])) is None
    assert describe(lambda image: image) is None


def test_an_unknown_description_format_is_refused() -> None:
    description = describe(load_efficientnet_lite0().preprocess)
    assert description is not None
    with pytest.raises(ValueError, match="format"):
        ArrayPreprocess({**description, "format": 99})
