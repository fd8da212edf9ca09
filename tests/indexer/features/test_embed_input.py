"""ResizeCrop: the embedder's crop of the 256-px working copy, made straight from the decode."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import photo
from PIL import Image
from torchvision import transforms

from splitaudit.indexer.features.decode import decode_image, fit_short_side
from splitaudit.indexer.features.embed_input import ResizeCrop, resized_size
from splitaudit.indexer.features.extract import extract_features

BICUBIC = int(Image.Resampling.BICUBIC)
# landscape, portrait, square; under 224, between 224 and 256, a draft-sized JPEG decode,
# large enough for the 256-px fit to box-reduce first (>= 6x), extreme aspect ratios
SIZES = [
    (500, 375),
    (375, 500),
    (300, 300),
    (876, 502),
    (240, 230),
    (200, 150),
    (257, 1000),
    (3000, 2000),
    (7, 300),
    (1024, 256),
]


def _reference(decoded: Image.Image, crop: ResizeCrop) -> Image.Image:
    """What the embedder's own transform cuts out of the working copy (torchvision on PIL)."""
    model = transforms.Compose(
        [
            transforms.Resize(crop.size, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop((crop.crop_height, crop.crop_width)),
        ]
    )
    out: Image.Image = model(fit_short_side(decoded))
    return out


@pytest.mark.parametrize("size", SIZES)
def test_crop_is_the_models_crop_of_the_working_copy(size: tuple[int, int]) -> None:
    # (the synthetic photos need some room: a sliver is a resized one)
    decoded = photo(sum(size), size) if min(size) >= 48 else photo(0, (96, 96)).resize(size)
    crop = ResizeCrop(size=224, crop_height=224, crop_width=224, resample=BICUBIC)
    got = np.asarray(crop.apply(decoded)).astype(np.int16)
    want = np.asarray(_reference(decoded, crop)).astype(np.int16)
    assert got.shape == want.shape == (224, 224, 3)
    diff = np.abs(got - want)
    # Pillow's box resize rounds its box to float32, which moves the filter's sample points by
    # ~1e-5 px: up to a third of the pixels move by a level, very few by more
    assert diff.mean() < 0.5
    assert (diff > 2).mean() < 0.01
    assert diff.max() <= 16


def test_crop_differs_from_another_photo() -> None:
    """The bound above is tight enough to tell images apart (the check can fail)."""
    crop = ResizeCrop(size=224, crop_height=224, crop_width=224, resample=BICUBIC)
    got = np.asarray(crop.apply(photo(1, (500, 375)))).astype(np.int16)
    other = np.asarray(_reference(photo(2, (500, 375)), crop)).astype(np.int16)
    assert np.abs(got - other).mean() > 5


def test_small_decode_is_cropped_without_resampling() -> None:
    """Short side already the model's size and under 256: the crop is a plain crop, exactly."""
    decoded = photo(3, (300, 224))
    crop = ResizeCrop(size=224, crop_height=224, crop_width=224, resample=BICUBIC)
    assert np.array_equal(np.asarray(crop.apply(decoded)), np.asarray(_reference(decoded, crop)))


def test_non_square_crop_and_other_filters() -> None:
    decoded = photo(4, (640, 427))
    for resample in (Image.Resampling.BILINEAR, Image.Resampling.LANCZOS):
        crop = ResizeCrop(size=256, crop_height=224, crop_width=200, resample=int(resample))
        model = transforms.Compose(
            [
                transforms.Resize(
                    256, interpolation=transforms.InterpolationMode(resample.name.lower())
                ),
                transforms.CenterCrop((224, 200)),
            ]
        )
        want = np.asarray(model(fit_short_side(decoded))).astype(np.int16)
        got = np.asarray(crop.apply(decoded)).astype(np.int16)
        assert got.shape == want.shape == (224, 200, 3)
        assert np.abs(got - want).mean() < 0.5


def test_resized_size_is_torchvisions() -> None:
    for h, w in [(375, 500), (500, 375), (224, 224), (7, 300), (257, 256)]:
        image = Image.new("RGB", (w, h))
        out = transforms.Resize(224)(image)
        assert resized_size(h, w, 224) == (out.height, out.width)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 224, "crop_height": 256, "crop_width": 224, "resample": BICUBIC}, "must fit"),
        ({"size": 224, "crop_height": 224, "crop_width": 224, "resample": 0}, "filtered"),
    ],
)
def test_geometry_it_cannot_fuse_is_refused(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ResizeCrop(**kwargs)


def test_extract_features_returns_the_crop_and_the_same_hashes() -> None:
    import io

    buf = io.BytesIO()
    photo(5, (500, 375)).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    crop = ResizeCrop(size=224, crop_height=224, crop_width=224, resample=BICUBIC)
    plain, working = extract_features(data, keep_image=True)
    fused, image = extract_features(data, keep_image=True, embed_input=crop)
    assert plain == fused  # hashes, digests: the embedding input changes nothing else
    assert working is not None and working.size == (341, 256)  # the 256-px working copy
    assert image is not None and image.size == (224, 224)
    want = np.asarray(_reference(decode_image(data).decoded, crop)).astype(np.int16)
    assert np.abs(np.asarray(image).astype(np.int16) - want).mean() < 0.5
