"""Tests for the bundled EfficientNet-Lite0 encoder: weight mapping and retrieval quality."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image, ImageOps

from splitaudit.indexer.embed import load_embedder
from splitaudit.indexer.embed.efficientnet import load_config, map_state_dict, weights_path
from splitaudit.indexer.errors import ModelUnavailableError

# scikit-image's bundled sample photos (no download): people, objects, space, medical, texture
PHOTOS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "motorcycle",
    "immunohistochemistry",
    "hubble_deep_field",
    "retina",
    "camera",
    "coins",
    "moon",
    "grass",
)


def _photo(name: str) -> Image.Image:
    from skimage import data

    if name == "motorcycle":
        return Image.fromarray(data.stereo_motorcycle()[0])
    return Image.fromarray(getattr(data, name)()).convert("RGB")


def _jpeg_q30(image: Image.Image) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=30)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def _crop_90(image: Image.Image) -> Image.Image:
    w, h = image.size
    dw, dh = round(w * 0.05), round(h * 0.05)
    return image.crop((dw, dh, w - dw, h - dh))


def _resize_third(image: Image.Image) -> Image.Image:
    return image.resize((image.width // 3, image.height // 3), Image.Resampling.BILINEAR)


EDITS: dict[str, Callable[[Image.Image], Image.Image]] = {
    "resize": _resize_third,
    "jpeg_q30": _jpeg_q30,
    "hflip": ImageOps.mirror,
    "crop_90": _crop_90,
}


def _source_and_target() -> tuple[dict, dict]:
    import timm
    import torch

    source = torch.load(weights_path(), map_location="cpu", weights_only=True)
    trunk = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=0)
    return source, trunk.state_dict()


def test_config_describes_a_1280_d_timm_tower() -> None:
    config = load_config()
    assert config["model_cfg"]["embed_dim"] == 1280
    assert config["model_cfg"]["vision_cfg"]["timm_model_name"] == "tf_efficientnet_lite0"
    assert config["model_cfg"]["vision_cfg"]["timm_proj"] == "none"
    assert config["preprocess_cfg"]["mean"] == [0.498] * 3
    assert config["preprocess_cfg"]["std"] == [0.502] * 3


def test_all_247_tensors_map_onto_timm_in_order() -> None:
    source, target = _source_and_target()
    mapped = map_state_dict(source, target)
    expected = [k for k in target if not k.endswith("num_batches_tracked")]
    assert list(mapped) == expected
    assert len(expected) + 2 == 247
    assert all(mapped[k].shape == target[k].shape for k in expected)


def test_a_shape_mismatch_fails_loudly() -> None:
    import torch

    source, target = _source_and_target()
    key = next(k for k in source if k.endswith("_bn0.weight"))
    source[key] = torch.zeros(7)
    with pytest.raises(ModelUnavailableError, match="do not match"):
        map_state_dict(source, target)


def test_a_missing_tensor_fails_loudly() -> None:
    source, target = _source_and_target()
    del source[next(iter(source))]
    with pytest.raises(ModelUnavailableError, match="tensors, expected 247"):
        map_state_dict(source, target)


def test_bundled_encoder_loads_with_stable_id() -> None:
    embedder = load_embedder("efficientnet-lite0", batch_size=4)
    out = embedder.embed([_photo("coffee"), _photo("rocket")])
    assert embedder.model_id == "efficientnet-lite0:imagenet"
    assert embedder.dim == 1280
    assert out.shape == (2, 1280)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_edited_copies_retrieve_their_own_original() -> None:
    # Measured (12 photos): edited copy vs its original 0.83-1.00 cosine; unrelated photos
    # 0.07-0.51; the worst own-vs-best-other margin is 0.38 (JPEG q30).
    embedder = load_embedder("efficientnet-lite0")
    originals = [_photo(name) for name in PHOTOS]
    base = embedder.embed(originals)
    unrelated = (base @ base.T)[~np.eye(len(PHOTOS), dtype=bool)]
    assert unrelated.max() < 0.65
    for edit_name, edit in EDITS.items():
        cos = embedder.embed([edit(image) for image in originals]) @ base.T
        own = np.diag(cos)
        best_other = np.where(np.eye(len(PHOTOS), dtype=bool), -1.0, cos).max(axis=1)
        assert list(cos.argmax(axis=1)) == list(range(len(PHOTOS))), edit_name
        assert own.min() > 0.75, (edit_name, own.round(3))
        assert (own - best_other).min() > 0.25, (edit_name, (own - best_other).round(3))
